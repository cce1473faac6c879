"""CPU per cold timeline request (meta and tiles) on a many-rank store, this tree against a baseline
tree alternated in the same run, and whether both trees answer byte for byte the same.

Each round runs one fresh process per tree that opens the app in process (Flask test client: the
request's work and its encoding count, no network) and makes, for ``--visits`` visits, what
``bench_load.py``'s timeline visit makes: ``meta`` of 8 ranks (8 consecutive ranks from a random
first one, every third visit 8 ranks drawn at random), then the tiles of the whole run (folded
groups), of one step, of 1 ms and of 10 us (the lanes of the 8 ranks, at most 256 tiles a request).
The ranks of most visits were never seen by the process: their answers are cold. Both trees make
the same random choices; the sha256 of every answer is compared between them.

The store: ``bench_cluster.build_job(tests/data/kineto_gloo_4rank_slow, 256, slow 1)`` ingested
with ``analyze ingest JOB --run job --workers 2`` (or any store and run). The baseline: a tree
holding another version's ``webapp`` (``git archive main webapp | tar -x -C /tmp/base``); it runs
with this tree's ``analyzer`` (the stored analyses are keyed by the analyzer's code).

    python bench/bench_timeline_cold.py --store /tmp/store256 --baseline /tmp/base --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KINDS = ("meta", "tiles whole run", "tiles step", "tiles 1 ms", "tiles 10 us")


def visit_ranks(rng: Any, n: int, visit: int) -> list[int]:
    """The 8 ranks of a visit of a timeline of ``n`` ranks: consecutive from a random first one,
    every third visit 8 drawn at random."""
    first = rng.randrange(0, max(1, n - 7))
    return sorted(rng.sample(range(n), min(8, n))) if visit % 3 == 1 else list(range(first, min(n, first + 8)))


def child(store: str, run: str, visits: int, seed: int) -> None:
    """One tree's visits in this process: prints {kind: [cpu s per call]}, "hashes": [...] as JSON."""
    import hashlib
    import random
    import time

    from analyzer.store import Store
    from webapp import tiles
    from webapp.app import create_app
    from webapp.params import format_ranks

    c = create_app(Store(store)).server.test_client()
    rng = random.Random(seed)
    n = len(c.get(f"/_timeline/meta?run={run}&ranks=0").get_json()["all_ranks"])
    cpu: dict[str, list[float]] = {k: [] for k in KINDS}
    hashes: list[str] = []

    def timed(kind: str, method: str, path: str, **kw: Any) -> Any:
        t = time.process_time()
        r = c.open(path, method=method, **kw)
        cpu[kind].append(time.process_time() - t)
        if r.status_code != 200:
            raise SystemExit(f"{kind}: HTTP {r.status_code}: {r.data[:300]!r}")
        hashes.append(hashlib.sha256(r.data).hexdigest())
        return r

    for v in range(visits):
        ranks = visit_ranks(rng, n, v)
        m = timed("meta", "GET", f"/_timeline/meta?run={run}&ranks={format_ranks(ranks)}").get_json()
        ev = m["events"].get(str(ranks[0]))
        steps = [s for s in m["steps"] if s[0] == ranks[0]]
        if not ev or not steps:
            continue
        folded = list(dict.fromkeys(f"{ln['rank']}.{ln['group']}" for ln in m["lanes"] if ln["group"] != "other"))
        lanes = [ln["key"] for ln in m["lanes"] if ln["group"] != "other"][:40]
        st = rng.choice(steps)
        a = rng.uniform(ev[0], max(ev[0], ev[1] - 1e6))
        for kind, keys, lo, hi in (
            ("tiles whole run", folded[:40], ev[0], ev[1]),
            ("tiles step", lanes, st[2], st[3]),
            ("tiles 1 ms", lanes, a, a + 1e6),
            ("tiles 10 us", lanes, a, a + 1e4),
        ):
            z = tiles.level_for((hi - lo) / 1600)
            want = [[k, z, i] for k in keys for i in tiles.tiles_for(lo, hi, z)][:256]
            timed(kind, "POST", "/_timeline/tiles", json={"run": run, "fp": m["fp"], "tiles": want})
    print(json.dumps({"cpu": cpu, "hashes": hashes}))


def run_tree(script: str, tree: Path | None, args: argparse.Namespace, seed: int) -> dict:
    """``script --child`` in a fresh process, with ``tree``'s webapp (None: this tree's); its JSON."""
    env = dict(os.environ)
    if tree is not None:  # the baseline's webapp, this tree's analyzer
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(REPO)])
    cmd = [sys.executable, script, "--child", "--store", args.store, "--run", args.run]
    cmd += ["--visits", str(args.visits), "--seed", str(seed)]
    out = subprocess.run(cmd, env=env, cwd=str(REPO), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tree or 'this tree'}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def arguments(doc: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", default="job")
    ap.add_argument("--baseline", type=Path, help="a tree holding the baseline's webapp package")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--visits", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def alternated(script: str, args: argparse.Namespace) -> Iterator[tuple[int, dict[str, tuple[dict, float, float]]]]:
    """Per round (1, 2, ...): each tree's answer of ``script --child`` with the load average before
    and after it, this tree first in odd rounds, the baseline first in even ones."""
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.baseline is not None:
        trees.append(("baseline", args.baseline.resolve()))
    for rnd in range(args.rounds):
        got = {}
        for name, tree in trees if rnd % 2 == 0 else trees[::-1]:
            load = os.getloadavg()[0]
            got[name] = (run_tree(script, tree, args, args.seed + rnd), load, os.getloadavg()[0])
        yield rnd + 1, got


def main() -> None:
    args = arguments(__doc__)
    if args.child:
        child(args.store, args.run, args.visits, args.seed)
        return
    for rnd, got in alternated(__file__, args):
        for name, (res, load, _) in got.items():
            cells = []
            for kind in KINDS:
                xs = sorted(res["cpu"][kind])
                if xs:
                    cells.append(f"{kind} {1000 * xs[len(xs) // 2]:.1f} ms ({1000 * sum(xs):.0f})")
            print(f"round {rnd}, {name} (load {load:.1f}): CPU median per call (total): " + ", ".join(cells))
        if len(got) == 2:
            a, b = (got[name][0]["hashes"] for name in ("this tree", "baseline"))
            print(f"round {rnd}: {len(a)} answers, " + ("identical" if a == b else "DIFFERENT"))


if __name__ == "__main__":
    main()
