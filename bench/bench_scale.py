"""Every page of the web app on an ingested many-rank store, over HTTP, by one user at a time.

The store is one ``analyze ingest`` wrote (aggregates and the run's stored analyses included), e.g.
the 256-rank job ``bench_cluster.py --keep-store`` keeps. The server is ``analyze serve --port 0``
(waitress) in its own process, started fresh: its caches are cold, its background warm-up on (as a
user gets it). One simulated browser (``bench_load.User``: its own HTTP session, the calls the
browser makes for each page) then

- opens every page once, in turn: the **first view** of each page (HTML, Dash layout and
  dependencies, the router, the page's callbacks) and the time of each of its requests;
- visits every page ``--repeat`` more times, in rotation, with varied parameters (ranks, steps,
  metrics, windows): **p50 / p95 per request kind**;
- reads the server process's resident memory (VmRSS) and its peak (VmHWM) after the first views
  and at the end.

    python bench/bench_scale.py --store /tmp/rankscope-bench-256/store --run job --repeat 20
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "tests")]

from bench_load import PAGES, Recorder, User, start_server, store_info, tree_rss_mib  # noqa: E402
from bench_webapp import pct  # noqa: E402


def memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024  # MiB
    out["tree_VmRSS"] = tree_rss_mib(pid)  # with --workers: the parent and every worker
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", default="job")
    ap.add_argument("--repeat", type=int, default=20, help="visits of every page after its first")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--workers", type=int, default=1, help="analyze serve --workers (server processes)")
    ap.add_argument("--code", default=None, help="serve with this checkout's packages (the baseline)")
    args = ap.parse_args()
    info = store_info(Path(args.store), args.run)
    proc, url = start_server(
        Path(args.store), secrets.token_urlsafe(24), Path(args.code).resolve() if args.code else None, args.workers
    )
    base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
    out: dict[str, Any] = {"store": args.store, "ranks": info["n_ranks"], "first_view": {}, "kinds": {}}
    try:
        rec = Recorder()
        rec.counting = True
        user = User(base, url, rec, [], info)
        user.open()
        user.deps = user.http.get(base + "/_dash-dependencies", timeout=120).json()
        rec.times.clear()
        for page in PAGES:  # the first view of each page, cold
            before = {k: len(v) for k, v in rec.times.items()}
            t = time.perf_counter()
            user.visit(page)
            calls = {k: v[before.get(k, 0) :] for k, v in rec.times.items() if len(v) > before.get(k, 0)}
            slowest = max(((k, max(v)) for k, v in calls.items()), key=lambda kv: kv[1])
            out["first_view"][page] = {"wall": time.perf_counter() - t, "slowest": slowest}
            wall = out["first_view"][page]["wall"]
            print(f"first view {page:<15} {wall:6.2f} s  (slowest: {slowest[0]} {slowest[1]:.2f} s)")
        out["memory_after_first_views"] = memory(proc.pid)
        rec.times.clear()
        rec.errors.clear()
        for _ in range(args.repeat):
            for page in PAGES:
                user.visit(page)
        out["memory_end"] = memory(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"\n{'request':<24} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for kind, xs in sorted(rec.times.items()):
        out["kinds"][kind] = {"n": len(xs), "p50": pct(xs, 0.5), "p95": pct(xs, 0.95), "max": max(xs)}
        print(f"{kind:<24} {len(xs):5d} {pct(xs, 0.5) * 1e3:8.0f} {pct(xs, 0.95) * 1e3:8.0f} {max(xs) * 1e3:8.0f}")
    errors = {k: v[:2] for k, v in rec.errors.items()}
    out["errors"] = errors
    print(f"errors: {sum(len(v) for v in rec.errors.values())} {errors if errors else ''}")
    m0, m1 = out["memory_after_first_views"], out["memory_end"]
    print(f"server RSS after the first views {m0['VmRSS']:.0f} MiB, at the end {m1['VmRSS']:.0f} MiB", end="")
    print(f" (peak {m1['VmHWM']:.0f} MiB); all processes: {m0['tree_VmRSS']:.0f} / {m1['tree_VmRSS']:.0f} MiB")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
