"""Server time of the timeline's counter-track and flow-arrow requests on the 64-rank bench store,
this tree against a baseline tree (another version of rankscope) alternated in the same run.

The store is the one ``bench/bench_webapp.py`` builds (``bench/out/webapp_store``: 64 ranks
replicated from the torch_npu Level1 sample). Each round runs one fresh process per tree (so both
start cold: imports, no cached samples or lane indexes) that opens the app in process (Flask test
client: the request's work and its JSON encoding count, no network) and times, with the same random
choices in both trees:

- ``counters``: the counter tracks a view of 8 ranks asks for first (a rank's top tracks: all it
  lists in a tree that lists at most 16) over one step, 1150 buckets; 8 ranks drawn at random per
  call, so most calls read their ranks' samples for the first time;
- ``flows``: the flow arrows (launch, send/recv, collectives) of the same 8 ranks over a 1 ms
  window of the step, after the tiles of that window were asked for (as the browser does: arrows
  are asked for once the view shows named slices; the lane indexes are built then).

Rounds alternate the order of the trees (A B, B A, ...) and each prints the load average before it.

    git archive main | tar -x -C /tmp/main_src
    python bench/bench_timeline_requests.py --baseline /tmp/main_src --rounds 4 --calls 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "bench" / "out" / "webapp_store"
RUN = "bench64"

# run in each tree's own process: only the HTTP endpoints and create_app, which both trees have
WORKER = r"""
import json, random, sys, time
from webapp import create_app, tiles, warmup
warmup.ENABLED = False
store, run, calls, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
http = create_app(store).server.test_client()
http.get("/")
rng = random.Random(seed)
out = {"counters": [], "flows": [], "tracks": [], "arrows": []}
fmt = lambda rs: f"{rs[0]}-{rs[-1]}"
for _ in range(calls):
    start = rng.randrange(0, 64 - 8 + 1)
    rs = list(range(start, start + 8))
    m = http.get(f"/_timeline/meta?run={run}&ranks={fmt(rs)}").get_json()
    off = {str(c["rank"]): c["offset"] or 0 for c in m["clock"]}
    st = rng.choice([s for s in m["steps"] if s[0] == rs[0]])
    keys = [c["key"] for c in m["counters"] if c.get("top", True)]
    t = time.perf_counter()
    r = http.post("/_timeline/counters", json={"run": run, "fp": m["fp"], "tracks": keys, "offsets": off,
                                              "a": st[2], "b": st[3], "n": 1150})
    out["counters"].append(time.perf_counter() - t)
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    out["tracks"].append(len(keys))
    a = rng.uniform(st[2], max(st[2] + 1, st[3] - 1e6))
    b = a + 1e6
    lanes = [ln["key"] for ln in m["lanes"] if ln["group"] in ("host", "device", "communication")]
    z = tiles.level_for((b - a) / 1150)
    want = [[k, z, i] for k in lanes for i in tiles.tiles_for(a, b, z)]
    for lo in range(0, len(want), 256):
        r = http.post("/_timeline/tiles", json={"run": run, "fp": m["fp"], "tiles": want[lo:lo + 256]})
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
    t = time.perf_counter()
    r = http.post("/_timeline/flows", json={"run": run, "fp": m["fp"], "ranks": rs,
                                           "kinds": ["launch", "p2p", "collective"], "offsets": off, "a": a, "b": b})
    out["flows"].append(time.perf_counter() - t)
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    out["arrows"].append(len(r.get_json()["arrows"]))
print(json.dumps(out))
"""


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="a source tree of the version to compare with")
    ap.add_argument("--store", default=str(STORE))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10, help="calls of each request per process")
    args = ap.parse_args()
    trees = {"baseline": Path(args.baseline).resolve(), "this": REPO}
    got: dict[str, dict[str, list[float]]] = {k: {"counters": [], "flows": []} for k in trees}
    loads = []
    for i in range(args.rounds):
        order = list(trees) if i % 2 == 0 else list(trees)[::-1]
        for name in order:
            load = os.getloadavg()[0]
            loads.append(load)
            env = {**os.environ, "PYTHONPATH": str(trees[name])}
            proc = subprocess.run(
                [sys.executable, "-c", WORKER, args.store, RUN, str(args.calls), str(i)],
                capture_output=True,
                text=True,
                env=env,
                cwd=trees[name],
                check=False,
            )
            if proc.returncode:
                raise SystemExit(f"{name}: {proc.stderr[-2000:]}")
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            for k in ("counters", "flows"):
                got[name][k] += out[k]
            c50, f50 = statistics.median(out["counters"]) * 1e3, statistics.median(out["flows"]) * 1e3
            tracks, arrows = statistics.mean(out["tracks"]), statistics.mean(out["arrows"])
            print(
                f"round {i + 1} {name:8s} load {load:4.1f}: counters p50 {c50:6.0f} ms ({tracks:.0f} tracks), "
                f"flows p50 {f50:6.0f} ms ({arrows:.0f} arrows)",
                flush=True,
            )
    print(f"load average {min(loads):.1f}-{max(loads):.1f}; {args.rounds} rounds x {args.calls} calls per tree")
    print("| request | tree | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|---|")
    for k in ("counters", "flows"):
        for name in trees:
            xs = got[name][k]
            print(f"| {k} | {name} | {statistics.median(xs) * 1e3:.0f} | {p95(xs) * 1e3:.0f} | {max(xs) * 1e3:.0f} |")


if __name__ == "__main__":
    main()
