"""The host operators of the CANN family's exports, finished with Arrow and numpy (no SQL engine):
their nesting (``chrome.nesting``), the step of each, and the order they are stored in.

The text export (``output``) and the profiler db (``db.timeline``) stage their host ops (``_pid``,
``tid``, ``ts_ns``, ``dur_ns``, ``event_id``, ...) while they read, then finish them here. Orders
are those of an SQL ``ORDER BY`` with NULLs last (every key, ascending or not), ties broken by the
event id, which is unique.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base import ReadContext
from ..chrome.nesting import self_time

# per thread (pid, tid), by start, the enclosing op (the longest) first: the nesting's order
_NEST = [("_pid", "ascending"), ("tid", "ascending"), ("ts_ns", "ascending"), ("dur_ns", "descending")]
_BY_ID = [("event_id", "ascending")]


def sort_order(ops: pa.Table, keys: list[tuple[str, str]]) -> np.ndarray:
    """Row positions of ``ops`` sorted by ``keys`` then ``event_id`` (NULLs last)."""
    cols = [k for k, _ in keys] + ["event_id"]
    idx = pc.sort_indices(ops.select(cols), sort_keys=keys + _BY_ID)  # NULLs last: Arrow's default
    return idx.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def nest_order(ops: pa.Table) -> np.ndarray:
    """Row positions of ``ops`` in the nesting's order (thread, start, longest first)."""
    return sort_order(ops, _NEST)


def time_order(ops: pa.Table) -> np.ndarray:
    """Row positions of ``ops`` in the order they are stored: by start, then event id."""
    return sort_order(ops, [("ts_ns", "ascending")])


def nesting(ops: pa.Table, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth (int32) and self time (int64 ns) of every row of ``ops``, in row order, from the rows in
    the nesting's ``order`` (``nest_order``)."""
    cols = ops.select(["_pid", "tid", "ts_ns", "dur_ns", "event_id"]).take(pa.array(order))
    nest = self_time(cols)
    n = ops.num_rows
    depth = np.empty(n, dtype=np.int32)
    self_ns = np.empty(n, dtype=np.int64)
    depth[order] = nest.column("depth").to_numpy()
    self_ns[order] = nest.column("self_ns").to_numpy()
    return depth, self_ns


def step_of_starts(steps: list[tuple[int, int, int]], ts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Step (int32) of each start: the latest step started at or before it, when it has not ended
    by then (an as-of join on the steps' starts); NULL before every step, after its end, or for a
    missing time."""
    n = len(ts)
    if not steps or not n:
        return pa.nulls(n, pa.int32())
    step = np.array([s[0] for s in steps], dtype=np.int64)
    start = np.array([s[1] for s in steps], dtype=np.int64)
    end = np.array([s[2] for s in steps], dtype=np.int64)
    by_start = np.lexsort((step, start))
    step, start, end = step[by_start], start[by_start], end[by_start]
    t = pc.fill_null(ts, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    k = np.searchsorted(start, t, side="right") - 1
    kk = np.maximum(k, 0)
    ok = (k >= 0) & (t < end[kk])
    if ts.null_count:
        ok &= ts.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(step[kk].astype(np.int32), pa.int32(), mask=~ok)


def write_in_order(ctx: ReadContext, table: str, rows: pa.Table, order: np.ndarray, batch: int = 200_000) -> None:
    """``rows`` written to ``table`` in ``order``, ``batch`` rows at a time."""
    for lo in range(0, len(order), batch):
        ctx.write(table, rows.take(pa.array(order[lo : lo + batch])))
