"""Pages from the aggregates stored at ingest vs from the facts, at 64 (and 256) ranks.

The job is built from real traces through the readers: the two traces of
``sample_data/kineto_gloo_2rank`` (a real gloo training run) copied to N rank folders with their
rank and world size rewritten (``tests/helpers.replicated_kineto_job``), ingested by the local
pool. The baseline, measured in the same run, is the same store without its aggregates (their rows
removed from ``fact_files``: a store as ingested before aggregates existed, the facts identical),
which the web app serves the way it did before: the step breakdown computed from every task's
intervals, the timeline's whole-run view from in-memory lane indexes of every lane of every rank.

For each store, a fresh Python process (its own caches, its own memory) creates the web app and
calls it the way the browser does (Flask test client: Dash's own work and JSON encoding count):

- Overview: the content callback, first view (cold) then ``--repeat`` calls with varied steps;
- Timeline: ``/_timeline/meta`` for every rank, then the whole-run view of every rank's lanes at the
  level a 1150 px canvas draws (the first view), then ``--repeat`` zoomed-out views of varied
  windows (levels 18 and coarser) and rank sets;
- the process's resident memory after the Overview and after the Timeline (VmRSS) and its peak (VmHWM).

Also printed: the ingest time, and the time building the aggregates takes inside it (each
collection's ``aggregate.build`` timed again on the stored facts).

    python bench/bench_aggregates.py                 # 64 ranks
    python bench/bench_aggregates.py --ranks 256 --repeat 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

OUT = REPO / "bench" / "out"
RUN = "job"
TIMELINE_PX = 1150


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def rss() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) * 1024
    return out


def build(ranks: int, work: Path) -> dict[str, Any]:
    """The job, its store with aggregates, the same store without them; ingest and aggregate times."""
    from helpers import replicated_kineto_job

    from analyzer.ingest import aggregate, ingest
    from analyzer.store import Store

    if work.exists():
        shutil.rmtree(work)
    job = replicated_kineto_job(work / "job", ranks)
    store = Store(work / "store")
    t = time.perf_counter()
    report = ingest(job, store, run=RUN)
    ingest_s = time.perf_counter() - t
    # the aggregates' share of the ingest: build them again from each collection's stored facts
    cat = store.load_catalog(["collections", "fact_files"])
    facts = [f for f in cat["fact_files"].to_pylist() if not f["table_name"].startswith("agg_")]
    t = time.perf_counter()
    for row in cat["collections"].to_pylist():
        built = aggregate.build(str(store.path), row, [f for f in facts if f["collection_id"] == row["collection_id"]])
        for f in built:
            (store.path / f["path"]).unlink()
    agg_s = time.perf_counter() - t
    before = Store(work / "store_before")
    shutil.copytree(store.path, before.path)
    with before.write_connection() as con:
        con.execute("DELETE FROM fact_files WHERE table_name LIKE 'agg_%'")
    before.garbage_collect()
    size = sum(f.stat().st_size for f in store.path.rglob("*.parquet"))
    agg_size = sum(f.stat().st_size for f in store.path.rglob("*.parquet") if "/agg_" in str(f))
    return {
        "ranks": ranks,
        "collections": len(report.read),
        "ingest_s": ingest_s,
        "aggregates_s_one_process": agg_s,
        "store_bytes": size,
        "aggregate_bytes": agg_size,
        "stores": {"aggregates": str(store.path), "facts (before)": str(before.path)},
    }


def measure(store_path: str, repeat: int, seed: int) -> dict[str, Any]:
    """In a fresh process: the Overview and the Timeline served from ``store_path``."""
    from webapp_helpers import DashClient

    from webapp import create_app, tiles

    rng = random.Random(seed)
    cl = DashClient(create_app(store_path))
    out: dict[str, Any] = {}

    def overview(step: Any) -> float:
        t = time.perf_counter()
        cl.call("ov-content.children", {"ov-run.value": RUN, "ov-ranks.value": [], "ov-step.value": step})
        return time.perf_counter() - t

    out["overview_first_s"] = overview("mean")
    steps = ["mean"] + [
        int(s["value"]) for s in cl.call("ov-ranks.options", {"ov-run.value": RUN})["ov-step"]["options"][1:]
    ]
    times = [overview(rng.choice(steps)) for _ in range(repeat)]
    out["overview_p50_s"], out["overview_p95_s"] = pct(times, 50), pct(times, 95)
    out["rss_after_overview"] = rss()

    def tl_view(ranks: str, frac: tuple[float, float]) -> tuple[float, int]:
        t = time.perf_counter()
        m = cl.http.get(f"/_timeline/meta?run={RUN}&ranks={ranks}").get_json()
        lo = min(e[0] for e in m["events"].values())
        hi = max(e[1] for e in m["events"].values())
        a, b = lo + frac[0] * (hi - lo), lo + frac[1] * (hi - lo)
        z = max(tiles.level_for((b - a) / TIMELINE_PX), tiles.STORED_LEVELS[0])
        want = [[ln["key"], z, i] for ln in m["lanes"] for i in tiles.tiles_for(a, b, z)]
        n = 0
        for k in range(0, len(want), tiles.MAX_TILES_PER_REQUEST):
            r = cl.http.post("/_timeline/tiles", json={"run": RUN, "fp": m["fp"], "tiles": want[k : k + 512]})
            assert r.status_code == 200, r.get_data(as_text=True)[:300]
            n += len(r.data)
        return time.perf_counter() - t, n

    out["timeline_first_s"], out["timeline_first_bytes"] = tl_view("all", (0.0, 1.0))
    all_ranks = cl.http.get(f"/_timeline/meta?run={RUN}&ranks=all").get_json()["all_ranks"]
    times = []
    for _ in range(repeat):
        k = rng.choice([8, 16, len(all_ranks)])
        sel = sorted(rng.sample(all_ranks, min(k, len(all_ranks))))
        a = rng.random() * 0.5
        times.append(tl_view(",".join(map(str, sel)), (a, a + 0.5))[0])
    out["timeline_p50_s"], out["timeline_p95_s"] = pct(times, 50), pct(times, 95)
    out["rss_after_timeline"] = rss()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # internal: measure this store in this process
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat, args.seed)))
        return
    work = OUT / f"aggregates_{args.ranks}"
    info = build(args.ranks, work)
    print(
        f"{args.ranks} ranks ({info['collections']} collections): ingest {info['ingest_s']:.1f} s, of which "
        f"aggregates about {info['aggregates_s_one_process']:.1f} s of one process's time; store "
        f"{info['store_bytes'] / 1e6:.1f} MB, aggregates {info['aggregate_bytes'] / 1e6:.1f} MB"
    )
    results = {}
    for label, path in info["stores"].items():
        proc = subprocess.run(
            [sys.executable, __file__, "--measure", path, "--repeat", str(args.repeat), "--seed", str(args.seed)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    base = results["facts (before)"]
    print(f"\n{'':24} {'aggregates':>12} {'facts (before)':>15} {'ratio':>7}")
    for key, unit in (
        ("overview_first_s", "s"),
        ("overview_p50_s", "s"),
        ("overview_p95_s", "s"),
        ("timeline_first_s", "s"),
        ("timeline_p50_s", "s"),
        ("timeline_p95_s", "s"),
    ):
        a, b = results["aggregates"][key], base[key]
        print(f"{key:24} {a:>11.3f}{unit} {b:>14.3f}{unit} {a / b:>7.2f}")
    for key in ("rss_after_overview", "rss_after_timeline"):
        for k in ("VmRSS", "VmHWM"):
            a, b = results["aggregates"][key][k], base[key][k]
            print(f"{key + ' ' + k:24} {a / 1e6:>10.0f}MB {b / 1e6:>13.0f}MB {a / b:>7.2f}")


if __name__ == "__main__":
    main()
