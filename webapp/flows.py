"""The timeline's flow arrows over a view, bounded in number:

- ``launch``: a host call to the device task it launched — the slices of one collection sharing a
  link id (``slices.link``, read from the args at ingest): torch_npu's ``connection_id`` (a CANN
  API call on the host, the task on an Ascend Hardware stream), Kineto's ``correlation``
  (``cudaLaunchKernel`` and its kernel: the ``ac2g`` flow). Two scans of the slices: host calls
  from the launch lag before the view up to its end, device tasks from its start up to the lag after
  it (each widened by ``LAUNCH_SKEW_NS``: a task's clock may put it a little before its call);
- ``p2p``: a send to the recv it was paired with on another rank (``analyses.send_recv_pairs``);
- ``collective``: the members of one collective instance on their ranks (``analyses.collectives``
  matching), linked where each left it.

Each end is placed on the lane of the slice it stands for (found by rank, name and start), at the
slice's nesting level on that lane (from the lane's level-of-detail index the tiles were drawn
from, ``cache.LANES``; None when that index is not built: the lane's first level), so the browser
draws it at the slice wherever that lane is; times are view times (ns after the origin, minus the
rank's offset when the aligned clock is on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pandas as pd

from analyzer import analyses
from analyzer.analyses.clock_alignment import run_instances
from analyzer.errors import QueryError
from analyzer.store import Store

from . import cache, data
from .labels import LABELS, t
from .reader import Reader, reader

KINDS = ("launch", "p2p", "collective")
MAX_ARROWS = 400
LAUNCH_LAG_NS = 100_000_000  # a device task may run this long after its launch (asynchronous queues)
LAUNCH_SKEW_NS = 1_000_000  # a device task seen up to this long before its launch (the two clocks' error)
MATCH_NS = 2_000  # a comm op and its slice start within 2 µs of each other (µs floats in traces)

LAUNCH_SQL = """
WITH w AS (SELECT unnest($ranks) AS rank, unnest($lo) AS lo, unnest($hi) AS hi, unnest($in_lo) AS in_lo,
                  unnest($in_hi) AS in_hi),
l AS (SELECT DISTINCT rank, collection_id, pid, tid, lane_group FROM lanes
      WHERE run = $run AND lane_group IN ('host', 'device')),
h AS (
  SELECT s.rank, s.collection_id, s.pid, s.tid, s.ts_ns, s.link
  FROM slices s JOIN w ON s.rank = w.rank AND s.ts_ns >= w.lo AND s.ts_ns < least(w.hi, w.in_hi + $skew)
  WHERE s.run = $run AND s.ts_ns >= $h_lo AND s.ts_ns < $h_hi AND s.link IS NOT NULL),
d AS (
  SELECT s.rank, s.collection_id, s.pid, s.tid, s.ts_ns, s.name, s.link
  FROM slices s JOIN w ON s.rank = w.rank AND s.ts_ns >= greatest(w.lo, w.in_lo - $skew) AND s.ts_ns < w.hi
  WHERE s.run = $run AND s.ts_ns >= $d_lo AND s.ts_ns < $d_hi AND s.link IS NOT NULL)
SELECT h.rank, h.collection_id AS h_cid, h.pid AS h_pid, h.tid AS h_tid, h.ts_ns AS h_ts,
       d.collection_id AS d_cid, d.pid AS d_pid, d.tid AS d_tid, d.ts_ns AS d_ts, d.name AS d_name
FROM h JOIN l lh USING (rank, collection_id, pid, tid)
JOIN d ON d.rank = h.rank AND d.collection_id = h.collection_id AND d.link = h.link
JOIN l ld ON ld.rank = d.rank AND ld.collection_id = d.collection_id AND ld.pid = d.pid AND ld.tid = d.tid
JOIN w ON w.rank = h.rank
WHERE lh.lane_group = 'host' AND ld.lane_group = 'device'
  AND ((h.ts_ns >= w.in_lo AND h.ts_ns < w.in_hi) OR (d.ts_ns >= w.in_lo AND d.ts_ns < w.in_hi))
ORDER BY h.ts_ns
LIMIT $limit
"""

FIND_SQL = """
WITH w AS (SELECT unnest($ranks) AS rank, unnest($ts) AS ts, unnest($names) AS name, unnest($ids) AS id)
SELECT w.id, arg_min(s.collection_id, abs(s.ts_ns - w.ts)) AS cid, arg_min(s.pid, abs(s.ts_ns - w.ts)) AS pid,
       arg_min(s.tid, abs(s.ts_ns - w.ts)) AS tid, arg_min(s.ts_ns, abs(s.ts_ns - w.ts)) AS ts
FROM w JOIN slices s ON s.run = $run AND s.rank = w.rank AND s.name = w.name
  AND s.ts_ns BETWEEN w.ts - $tol AND w.ts + $tol
WHERE s.ts_ns BETWEEN $all_lo AND $all_hi
GROUP BY w.id
"""


def _q(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> pd.DataFrame:
    try:
        return con.execute(sql, params).df()
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip().splitlines()[0]) from exc


def _depths(rd: Reader, run: str, ranks: Sequence[int]) -> Callable[[Any, Any, Any, int], int | None]:
    """``depth(collection_id, pid, tid, start)``: the nesting level the tiles draw the slice at (the
    deepest slice starting then on its lane), from the lane's index when it is built (None if not)."""
    sources = data.lane_sources(rd, run, ranks)

    def depth(cid: Any, pid: Any, tid: Any, ts: int) -> int | None:
        src = sources.get(str(cid))
        index = cache.LANES.get(src[1]) if src else None
        ix = index.lanes.get((str(pid), str(tid))) if index else None
        if ix is None:
            return None
        rows = ix.select(int(ts), int(ts) + 1, min_dur=0)
        rows = rows[ix.starts[rows] == int(ts)]
        return int(ix.depth[rows].max()) if rows.size else None

    return depth


def arrows(
    store: Store,
    run: str,
    origin: int,
    lane_keys: dict[tuple[str, str, str], str],
    ranks: Sequence[int],
    kinds: Sequence[str],
    a: int,
    b: int,
    offsets: dict[int, int],
) -> dict[str, Any]:
    """The arrows of ``kinds`` between ``ranks`` with an end inside the view [a, b): each
    ``{"kind", "from": [lane, rank, t, level], "to": [lane, rank, t, level], "label"}`` (lane None
    when the slice is not found, level None when its lane's index is not built); at most
    ``MAX_ARROWS`` (``"more"``: how many were left out, of launches at most ``4 * MAX_ARROWS``
    counted)."""
    ranks = sorted({int(r) for r in ranks})
    span = b - a

    def view(rank: int, ns: int) -> int:
        return int(ns) - origin - offsets.get(int(rank), 0)

    def lane(cid: Any, pid: Any, tid: Any) -> str | None:
        return lane_keys.get((str(cid), str(pid), str(tid)))

    def inside(rank: int, ns: int) -> bool:
        return a <= view(rank, ns) < b

    def inside_all(rank: pd.Series, ns: pd.Series) -> pd.Series:
        """``inside`` of every row at once (the run's pairs and instances: filtered before the loops)."""
        t = pd.to_numeric(ns, errors="coerce") - origin - rank.map(lambda r: offsets.get(int(r), 0))
        return (t >= a) & (t < b)

    out: list[dict[str, Any]] = []
    more = 0
    wanted: list[tuple[int, int, str, int]] = []  # (rank, ts, name, arrow end id) whose lane is looked up
    with reader(store, run, ranks, ("slices", "lanes")) as rd:
        con = rd.facts(run, ranks, ("slices", "lanes"))
        depth = _depths(rd, run, ranks)
        if "launch" in kinds:
            slack = max(span, LAUNCH_LAG_NS)
            lo = [origin + a - slack + offsets.get(r, 0) for r in ranks]
            hi = [origin + b + slack + offsets.get(r, 0) for r in ranks]
            in_lo = [origin + a + offsets.get(r, 0) for r in ranks]
            in_hi = [origin + b + offsets.get(r, 0) for r in ranks]
            params = {"run": run, "ranks": ranks, "lo": lo, "hi": hi, "in_lo": in_lo, "in_hi": in_hi}
            # one range on each scan (the files' row groups outside it are skipped): a host call ends an
            # arrow in the view only if it starts before the view's end (its task runs after it), a
            # device task only if it starts after the view's start
            params |= {
                "skew": LAUNCH_SKEW_NS,
                "h_lo": min(lo),
                "h_hi": max(min(h, i + LAUNCH_SKEW_NS) for h, i in zip(hi, in_hi)),
                "d_lo": min(max(x, i - LAUNCH_SKEW_NS) for x, i in zip(lo, in_lo)),
                "d_hi": max(hi),
            }
            df = _q(con, LAUNCH_SQL, {**params, "limit": 4 * MAX_ARROWS})
            for r in df.itertuples(index=False):
                if not (inside(r.rank, r.h_ts) or inside(r.rank, r.d_ts)):
                    continue
                out.append(
                    {
                        "kind": "launch",
                        "from": [
                            lane_keys.get((str(r.h_cid), str(r.h_pid), str(r.h_tid))),
                            int(r.rank),
                            view(r.rank, r.h_ts),
                            depth(r.h_cid, r.h_pid, r.h_tid, r.h_ts),
                        ],
                        "to": [
                            lane_keys.get((str(r.d_cid), str(r.d_pid), str(r.d_tid))),
                            int(r.rank),
                            view(r.rank, r.d_ts),
                            depth(r.d_cid, r.d_pid, r.d_tid, r.d_ts),
                        ],
                        "label": t("tl.flow_label.launch", name=str(r.d_name)),
                    }
                )
        if "p2p" in kinds:
            pairs = analyses.send_recv_pairs(store, run)
            pairs = pairs[pairs["src_rank"].isin(ranks) & pairs["dst_rank"].isin(ranks)]
            pairs = pairs[
                inside_all(pairs["src_rank"], pairs["send_ts_ns"]) | inside_all(pairs["dst_rank"], pairs["recv_end_ns"])
            ]
            for p in pairs.itertuples(index=False):
                i = len(out)
                wanted += [
                    (p.src_rank, p.send_ts_ns, p.send_name, 2 * i),
                    (p.dst_rank, p.recv_ts_ns, p.recv_name, 2 * i + 1),
                ]
                size = "" if pd.isna(p.bytes) else t("tl.flow_label.bytes", bytes=f"{int(p.bytes):,}")
                way = t(f"tl.flow_dir.{p.direction}") if f"tl.flow_dir.{p.direction}" in LABELS else str(p.direction)
                out.append(
                    {
                        "kind": "p2p",
                        "from": [None, int(p.src_rank), view(p.src_rank, p.send_ts_ns), None],
                        "to": [None, int(p.dst_rank), view(p.dst_rank, p.recv_end_ns), None],
                        "label": t("tl.flow_label.p2p", direction=way, src=p.src_rank, dst=p.dst_rank, size=size),
                    }
                )
        if "collective" in kinds:
            ops, _ = run_instances(store, run)
            ops = ops[ops["instance"].notna() & ~ops["is_p2p"] & ops["rank"].isin(ranks)]
            # the instances with a member's end in the view (of every instance of the run)
            ops = ops[ops["instance"].isin(ops.loc[inside_all(ops["rank"], ops["end_ns"]), "instance"].unique())]
            for _, g in ops.groupby("instance", sort=False):
                if len(g) < 2:
                    continue
                g = g.sort_values("rank")
                rows = list(g.itertuples(index=False))
                for x, y in zip(rows[:-1], rows[1:]):
                    i = len(out)
                    wanted += [(x.rank, x.ts_ns, x.name, 2 * i), (y.rank, y.ts_ns, y.name, 2 * i + 1)]
                    out.append(
                        {
                            "kind": "collective",
                            "from": [None, int(x.rank), view(x.rank, x.end_ns), None],
                            "to": [None, int(y.rank), view(y.rank, y.end_ns), None],
                            "label": t(
                                "tl.flow_label.collective", name=str(x.name), op=str(x.op_type), a=x.rank, b=y.rank
                            ),
                        }
                    )
        if len(out) > MAX_ARROWS:
            more = len(out) - MAX_ARROWS
            out = out[:MAX_ARROWS]
            wanted = [w for w in wanted if w[3] // 2 < MAX_ARROWS]
        if wanted:
            found = _q(
                con,
                FIND_SQL,
                {
                    "run": run,
                    "ranks": [int(w[0]) for w in wanted],
                    "ts": [int(w[1]) for w in wanted],
                    "names": [str(w[2]) for w in wanted],
                    "ids": [int(w[3]) for w in wanted],
                    "tol": MATCH_NS,
                    # the range of every end on the scan itself (the join's per-end ranges are not pushed into it)
                    "all_lo": min(int(w[1]) for w in wanted) - MATCH_NS,
                    "all_hi": max(int(w[1]) for w in wanted) + MATCH_NS,
                },
            )
            for i, cid, pid, tid, ts in found.itertuples(index=False):
                end = out[int(i) // 2]["from" if int(i) % 2 == 0 else "to"]
                end[0], end[3] = lane(cid, pid, tid), depth(cid, pid, tid, ts)
    return {"arrows": out, "more": more}
