"""Server time of four issue-17 views on the 64-rank bench store, this tree against a baseline tree
(another version of rankscope) alternated in the same run: the Advisor, the Training page, the
Profiling page's refresh and the timeline's counter tracks, called as ``bench/bench_webapp.py`` calls
them (HTTP through the Flask test client: Dash's work and the JSON encoding count).

The store is the one ``bench/bench_webapp.py`` builds (``bench/out/webapp_store``). Each round runs
one fresh process per tree (both cold: imports, no cached answers or analyses), which builds the app
as ``analyze serve`` does in that tree (``webapp.warmup.settle`` when the tree has it) and calls each
view ``--calls`` times with the same random choices in both trees:

- ``advisor``: every finding, of every rank or of 8 consecutive ranks at random;
- ``training``: 64 ranks (the band) or 8 at random (their curves), a scalar at random (loss, lr,
  step time);
- ``profiling``: the Profiling page's refresh over a log of 64 ranks x 20 windows (``--control``);
- ``counters``: the counter tracks of 8 ranks at random over one of their steps, 1150 buckets (the
  lanes of those ranks asked for first, not timed).

The first call of each view in a process is reported apart ("first": its caches cold, the Advisor's
analyses computed); p50 / p95 are over the calls after it, wall and CPU time of the process (every
thread, DuckDB's too). Rounds alternate the order of the trees and print the load average.

    git archive main | tar -x -C /tmp/main_src
    python bench/bench_views.py --baseline /tmp/main_src --rounds 2 --calls 12
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STORE = REPO / "bench" / "out" / "webapp_store"
RUN = "bench64"
VIEWS = ("advisor", "training", "profiling", "counters")

# run in each tree's own process (cwd and PYTHONPATH the tree): only create_app, the callbacks'
# HTTP endpoints and the tests' callback_body, which both trees have
WORKER = r"""
import json, random, sys, time
from pathlib import Path
sys.path.insert(0, "tests")
from webapp_helpers import callback_body
from collector.dynamic import CONFIG_NAME, LOG_NAME
from webapp import create_app, warmup

warmup.ENABLED = False
store, run, calls, seed, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
views = sys.argv[6].split(",")
folder.mkdir(parents=True, exist_ok=True)
(folder / CONFIG_NAME).write_text(json.dumps({"start_step": 0, "active": 1, "ranks": [-1]}))
lines = [f"2026-01-01 00:00:00 host=node{r // 8} pid={1000 + r} rank={r} watching {folder}/{CONFIG_NAME}"
         for r in range(64)]
for k in range(20):
    for r in range(64):
        head = f"2026-01-01 00:{k:02d}:00 host=node{r // 8} pid={1000 + r} rank={r}"
        w = f"steps {100 * k}..{100 * k + 1}, all ranks"
        lines += [f"{head} accepted: window {w}, output below /out (read with torch_npu's meaning)",
                  f"{head} starting window {w} in /out/rank_{r}/window_step{100 * k}",
                  f"{head} stopped window {w}: complete, captured steps [{100 * k}, {100 * k + 1}]"]
(folder / LOG_NAME).write_text("\n".join(lines) + "\n")
app = create_app(store)
ctl = create_app(store, token="bench-token", control=folder)
http, chttp = app.server.test_client(), ctl.server.test_client()
chttp.environ_base["HTTP_AUTHORIZATION"] = "Bearer bench-token"
http.get("/"); chttp.get("/")
deps, cdeps = http.get("/_dash-dependencies").get_json(), chttp.get("/_dash-dependencies").get_json()
if hasattr(warmup, "settle"):  # what `analyze serve` does in a tree that has it
    warmup.settle()
rng = random.Random(seed)
out = {v: {"wall": [], "cpu": []} for v in ("advisor", "training", "profiling", "counters")}

def timed(view, client, path, body):
    if view not in views:  # its random choices are made all the same: the other views see the same ones
        return
    c, t = time.process_time(), time.perf_counter()
    r = client.post(path, json=body)
    out[view]["wall"].append(time.perf_counter() - t)
    out[view]["cpu"].append(time.process_time() - c)
    assert r.status_code in (200, 204), r.get_data(as_text=True)[:300]
    assert "msg-error" not in r.get_data(as_text=True), r.get_data(as_text=True)[:300]

def sel(n):
    s = rng.randrange(0, 64 - n + 1)
    return list(range(s, s + n))

for i in range(calls):
    body = callback_body(deps, "adv-content.children", {"adv-run.value": run,
        "adv-ranks.value": rng.choice([[], sel(8)]), "adv-severity.value": ["high", "medium", "low"],
        "adv-rule.value": None}, {"adv-want.data": None})
    timed("advisor", http, "/_dash-update-component", body)
    body = callback_body(deps, "tr-content.children", {"tr-run.value": run, "tr-ranks.value": rng.choice([[], sel(8)]),
        "tr-scalar.value": rng.choice(["loss", "lr", "step_time_ns"])})
    timed("training", http, "/_dash-update-component", body)
    body = callback_body(cdeps, "pf-config.children", {"pf-tick.n_intervals": i})
    timed("profiling", chttp, "/_dash-update-component", body)
    rs = sel(8)
    m = http.get(f"/_timeline/meta?run={run}&ranks={rs[0]}-{rs[-1]}").get_json()
    off = {str(c["rank"]): c["offset"] or 0 for c in m["clock"]}
    st = rng.choice([s for s in m["steps"] if s[0] == rs[0]])
    timed("counters", http, "/_timeline/counters", {"run": run, "fp": m["fp"],
        "tracks": [c["key"] for c in m["counters"]], "offsets": off, "a": st[2], "b": st[3], "n": 1150})
print(json.dumps(out))
"""


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="a source tree of the version to compare with")
    ap.add_argument("--store", default=str(STORE))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=12, help="calls of each view per process")
    ap.add_argument("--control", default=str(REPO / "bench" / "out" / "views_control"), help="a scratch folder")
    ap.add_argument("--views", default=",".join(VIEWS), help=f"the views to time (of {', '.join(VIEWS)})")
    args = ap.parse_args()
    views = [v for v in VIEWS if v in args.views.split(",")]
    trees = {"baseline": Path(args.baseline).resolve(), "this": REPO}
    firsts: dict[str, dict[str, list[float]]] = {k: {v: [] for v in VIEWS} for k in trees}
    got: dict[str, dict[str, dict[str, list[float]]]] = {k: {v: {"wall": [], "cpu": []} for v in VIEWS} for k in trees}
    loads = []
    for i in range(args.rounds):
        for name in list(trees) if i % 2 == 0 else list(trees)[::-1]:
            load = os.getloadavg()[0]
            loads.append(load)
            proc = subprocess.run(
                [sys.executable, "-c", WORKER, args.store, RUN, str(args.calls), str(i), args.control, ",".join(views)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(trees[name])},
                cwd=trees[name],
                check=False,
            )
            if proc.returncode:
                raise SystemExit(f"{name}: {proc.stderr[-2000:]}")
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            line = []
            for v in views:
                firsts[name][v].append(out[v]["cpu"][0])
                for k in ("wall", "cpu"):
                    got[name][v][k] += out[v][k][1:]
                line.append(f"{v} cpu p50 {statistics.median(out[v]['cpu'][1:]) * 1e3:.0f}")
            print(f"round {i + 1} {name:8s} load {load:4.1f}: " + ", ".join(line) + " ms", flush=True)
    print(f"load average {min(loads):.1f}-{max(loads):.1f}; {args.rounds} rounds x {args.calls} calls per tree")
    print("| view | tree | first CPU ms (median) | wall p50 / p95 ms | CPU p50 / p95 ms |")
    print("|---|---|---|---|---|")
    for v in views:
        for name in trees:
            w, c = got[name][v]["wall"], got[name][v]["cpu"]
            print(
                f"| {v} | {name} | {statistics.median(firsts[name][v]) * 1e3:.0f} | "
                f"{pct(w, 0.5) * 1e3:.0f} / {pct(w, 0.95) * 1e3:.0f} | "
                f"{pct(c, 0.5) * 1e3:.0f} / {pct(c, 0.95) * 1e3:.0f} |"
            )


if __name__ == "__main__":
    main()
