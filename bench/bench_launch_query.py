"""The timeline's launch-arrow query alone, as it reads the link id now (``slices.link``, written at
ingest) against how it read it before (JSON args parsed at request time), alternated in one process
on one connection over the 64-rank store of ``bench/bench_webapp.py``: windows of 1 ms on 8
consecutive ranks at random, the query of each order first in turn. Checks both find the same rows.

    python bench/bench_launch_query.py --windows 40
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analyzer.store import Store  # noqa: E402
from webapp import flows  # noqa: E402

NEW = flows.LAUNCH_SQL
OLD = NEW.replace(
    "SELECT s.rank, s.collection_id, s.pid, s.tid, s.ts_ns, s.name, s.link",
    "SELECT s.rank, s.collection_id, s.pid, s.tid, s.ts_ns, s.name,\n"
    "         coalesce(TRY_CAST(json_extract_string(s.args, '$.connection_id') AS BIGINT),\n"
    "                  TRY_CAST(json_extract_string(s.args, '$.correlation') AS BIGINT)) AS link",
).replace(
    "AND s.link IS NOT NULL)",
    "AND s.args IS NOT NULL\n    AND (s.args LIKE '%connection_id%' OR s.args LIKE '%correlation%'))",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=str(REPO / "bench" / "out" / "webapp_store"))
    ap.add_argument("--windows", type=int, default=40)
    args = ap.parse_args()
    assert OLD != NEW, "flows.LAUNCH_SQL changed: update the old text here"
    rng = random.Random(1)
    times: dict[str, list[float]] = {"old": [], "new": []}
    rows: dict[str, list[int]] = {"old": [], "new": []}
    print(f"load average {os.getloadavg()[0]:.1f}")
    with Store(args.store).read_connection(run="bench64") as con:
        lo_all, hi_all = con.execute("SELECT min(start_ns), max(end_ns) FROM collections").fetchone()
        n_ranks = con.execute("SELECT count(DISTINCT rank) FROM collections").fetchone()[0]
        for i in range(args.windows):
            start = rng.randrange(0, n_ranks - 8 + 1)
            a = rng.randrange(lo_all, hi_all - 2_000_000)
            b, slack = a + 1_000_000, flows.LAUNCH_LAG_NS
            p = {
                "run": "bench64", "ranks": list(range(start, start + 8)), "lo": [a - slack] * 8,
                "hi": [b + slack] * 8, "in_lo": [a] * 8, "in_hi": [b] * 8, "all_lo": a - slack,
                "all_hi": b + slack, "limit": 4 * flows.MAX_ARROWS,
            }  # fmt: skip
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                t0 = time.perf_counter()
                got = con.execute(OLD if name == "old" else NEW, p).fetchall()
                times[name].append(time.perf_counter() - t0)
                rows[name].append(len(got))
    assert rows["old"] == rows["new"], "the two queries found different arrows"
    print(f"load average {os.getloadavg()[0]:.1f}; {args.windows} windows, {sum(rows['new'])} rows in all")
    for name in ("old", "new"):
        xs = sorted(times[name])
        p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
        print(f"{name}: p50 {statistics.median(xs) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
