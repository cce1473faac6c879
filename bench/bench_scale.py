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
- reads the server's CPU time (user + system of its processes, ``/proc``) around every request: the
  **CPU p50 / p95 per request kind**, which a loaded machine inflates less than the wall time (with a
  single user the server serves one request at a time; its warm-up threads are charged to the request
  they run beside, unless ``--settle`` waits for them before the visits);
- reads the server process's resident memory (VmRSS) and its peak (VmHWM) after the first views
  and at the end.

    python bench/bench_scale.py --store /tmp/rankscope-bench-256/store --run job --repeat 20

The visits' parameters are drawn from a random generator seeded with ``--seed``: two rounds (the
code before and after a change) ask for the same views in the same order.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "tests")]

from bench_load import PAGES, Recorder, User, start_server, store_info, tree_cpu_s, tree_rss_mib  # noqa: E402
from bench_webapp import pct  # noqa: E402


def memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) / 1024  # MiB
    out["tree_VmRSS"] = tree_rss_mib(pid)  # with --workers: the parent and every worker
    return out


class MeteredUser(User):
    """A simulated browser that also reads the server's CPU time around each of its requests."""

    def __init__(self, pid: int, *args: Any) -> None:
        super().__init__(*args)
        self.pid = pid
        self.cpu: dict[str, list[float]] = {}

    def request(self, kind: str, method: str, path: str, **kw: Any) -> Any:
        c = tree_cpu_s(self.pid)
        r = super().request(kind, method, path, **kw)
        if self.rec.counting:
            self.cpu.setdefault(kind, []).append(tree_cpu_s(self.pid) - c)
        return r


def settle(pid: int, limit: float) -> float:
    """Wait (at most ``limit`` s) until the server's processes use < 5 % of a core over 2 s (its
    warm-up done); the seconds waited."""
    t = time.perf_counter()
    while time.perf_counter() - t < limit:
        c = tree_cpu_s(pid)
        time.sleep(2.0)
        if tree_cpu_s(pid) - c < 0.1:
            break
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", default="job")
    ap.add_argument("--repeat", type=int, default=20, help="visits of every page after its first")
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--workers", type=int, default=1, help="analyze serve --workers (server processes)")
    ap.add_argument("--code", default=None, help="serve with this checkout's packages (the baseline)")
    ap.add_argument("--seed", type=int, default=15, help="seed of the visits' parameters (same views every round)")
    ap.add_argument(
        "--settle", type=float, default=0.0, help="before the visits, wait up to this many s for the server to idle"
    )
    args = ap.parse_args()
    info = store_info(Path(args.store), args.run)
    proc, url = start_server(
        Path(args.store), secrets.token_urlsafe(24), Path(args.code).resolve() if args.code else None, args.workers
    )
    base = re.match(r"(http://[^/]+)", url).group(1)  # type: ignore[union-attr]
    out: dict[str, Any] = {"store": args.store, "ranks": info["n_ranks"], "first_view": {}, "kinds": {}}
    out["load_start"] = os.getloadavg()[0]
    try:
        rec = Recorder()
        rec.counting = True
        user = MeteredUser(proc.pid, base, url, rec, [], info)
        user.rng.seed(args.seed)
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
        if args.settle:
            out["settled_s"] = settle(proc.pid, args.settle)
            print(f"server idle after {out['settled_s']:.0f} s")
        rec.times.clear()
        rec.errors.clear()
        user.cpu.clear()
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
    print(f"\n{'request':<24} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'cpu p50':>8} {'cpu p95':>8}")
    for kind, xs in sorted(rec.times.items()):
        cpu = user.cpu.get(kind) or [0.0]
        out["kinds"][kind] = {
            "n": len(xs),
            "p50": pct(xs, 0.5),
            "p95": pct(xs, 0.95),
            "max": max(xs),
            "cpu_p50": pct(cpu, 0.5),
            "cpu_p95": pct(cpu, 0.95),
        }
        ms = [v * 1e3 for v in (pct(xs, 0.5), pct(xs, 0.95), max(xs), pct(cpu, 0.5), pct(cpu, 0.95))]
        print(f"{kind:<24} {len(xs):5d} " + " ".join(f"{v:8.0f}" for v in ms))
    out["load_end"] = os.getloadavg()[0]
    print(f"load average (1 min): {out['load_start']:.1f} at the start, {out['load_end']:.1f} at the end")
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
