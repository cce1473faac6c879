"""The timeline's launch-arrow query alone, as it scans now (host calls only up to the view's end,
device tasks only from its start, each +- ``flows.LAUNCH_SKEW_NS``) against how it scanned before
(one scan of every linked slice of the view +- the launch lag), alternated in one process
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analyzer.store import Store  # noqa: E402
from webapp import flows  # noqa: E402

NEW = flows.LAUNCH_SQL
# the query before (up to 57cc2d6): one scan of the slices of the view +- the launch lag, host and
# device sides alike
OLD = """
WITH w AS (SELECT unnest($ranks) AS rank, unnest($lo) AS lo, unnest($hi) AS hi, unnest($in_lo) AS in_lo,
                  unnest($in_hi) AS in_hi),
s AS (
  SELECT s.rank, s.collection_id, s.pid, s.tid, s.ts_ns, s.name, s.link
  FROM slices s JOIN w ON s.rank = w.rank AND s.ts_ns >= w.lo AND s.ts_ns < w.hi
  WHERE s.run = $run AND s.ts_ns >= $all_lo AND s.ts_ns < $all_hi AND s.link IS NOT NULL),
l AS (SELECT DISTINCT rank, collection_id, pid, tid, lane_group FROM lanes WHERE run = $run)
SELECT h.rank, h.collection_id AS h_cid, h.pid AS h_pid, h.tid AS h_tid, h.ts_ns AS h_ts,
       d.collection_id AS d_cid, d.pid AS d_pid, d.tid AS d_tid, d.ts_ns AS d_ts, d.name AS d_name
FROM s h JOIN l lh USING (rank, collection_id, pid, tid)
JOIN s d ON d.rank = h.rank AND d.collection_id = h.collection_id AND d.link = h.link
JOIN l ld ON ld.rank = d.rank AND ld.collection_id = d.collection_id AND ld.pid = d.pid AND ld.tid = d.tid
JOIN w ON w.rank = h.rank
WHERE h.link IS NOT NULL AND lh.lane_group = 'host' AND ld.lane_group = 'device'
  AND ((h.ts_ns >= w.in_lo AND h.ts_ns < w.in_hi) OR (d.ts_ns >= w.in_lo AND d.ts_ns < w.in_hi))
ORDER BY h.ts_ns
LIMIT $limit
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=str(REPO / "bench" / "out" / "webapp_store"))
    ap.add_argument("--windows", type=int, default=40)
    args = ap.parse_args()
    rng = random.Random(1)
    times: dict[str, list[float]] = {"old": [], "new": []}
    cpu: dict[str, list[float]] = {"old": [], "new": []}  # CPU time of the process (DuckDB's threads too)
    rows: dict[str, list[Any]] = {"old": [], "new": []}
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
            skew = flows.LAUNCH_SKEW_NS
            new = {k: v for k, v in p.items() if not k.startswith("all_")} | {
                "skew": skew, "h_lo": a - slack, "h_hi": b + skew, "d_lo": a - skew, "d_hi": b + slack,
            }  # fmt: skip
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                t0, c0 = time.perf_counter(), time.process_time()
                got = sorted(con.execute(OLD, p).fetchall() if name == "old" else con.execute(NEW, new).fetchall())
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                rows[name].append(got)
    assert rows["old"] == rows["new"], "the two queries found different arrows"
    print(f"load average {os.getloadavg()[0]:.1f}; {args.windows} windows, {sum(map(len, rows['new']))} rows in all")
    for name in ("old", "new"):
        xs, cs = sorted(times[name]), sorted(cpu[name])
        i95 = min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))
        print(
            f"{name}: wall p50 {statistics.median(xs) * 1e3:.0f} ms, p95 {xs[i95] * 1e3:.0f} ms; "
            f"CPU p50 {statistics.median(cs) * 1e3:.0f} ms, p95 {cs[i95] * 1e3:.0f} ms"
        )


if __name__ == "__main__":
    main()
