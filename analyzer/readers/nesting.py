"""Nesting of host operators on a thread: depth and self (exclusive) time.

Shared by the readers that build the ``operators`` table from ranges (Kineto ``cpu_op``, torch_npu
``trace_view.json`` and ``PYTORCH_API``): an op's self time is its duration minus the time of its
direct children on the same thread, a child that outlives its parent being clipped to the parent's end.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def self_time(ops: pa.Table) -> pa.Table:
    """Depth and self time of nested host ops, per thread.

    ``ops`` has columns ``_pid``, ``tid``, ``ts_ns``, ``dur_ns``, ``event_id`` and is sorted by
    (pid, tid, ts, -dur). Returns ``event_id``, ``depth``, ``self_ns``.
    """
    pid = ops.column("_pid").to_pylist()
    tid = ops.column("tid").to_pylist()
    ts = ops.column("ts_ns").to_numpy(zero_copy_only=False)
    dur = ops.column("dur_ns").to_numpy(zero_copy_only=False)
    eid = ops.column("event_id").to_numpy(zero_copy_only=False)
    n = len(ts)
    depth = np.zeros(n, dtype=np.int32)
    child = np.zeros(n, dtype=np.int64)
    stack: list[int] = []
    prev_key = None
    ends = (ts + dur).tolist()
    tsl = ts.tolist()
    for i in range(n):
        key = (pid[i], tid[i])
        if key != prev_key:
            stack.clear()
            prev_key = key
        t = tsl[i]
        while stack and ends[stack[-1]] <= t:
            stack.pop()
        if stack:
            p = stack[-1]
            depth[i] = len(stack)
            # clip a child that outlives its parent (async / imprecise ends) to the parent's end
            child[p] += min(ends[i], ends[p]) - t
        stack.append(i)
    self_ns = np.maximum(dur - child, 0)
    return pa.table({"event_id": eid, "depth": depth, "self_ns": self_ns})


def subtree_sum(pid: list[str | None], tid: list[str | None], ts: np.ndarray, dur: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For ops sorted by (pid, tid, ts, -dur): each op's value plus the values of every op nested in
    it on the same thread (e.g. device time of an op and of all the ops it called)."""
    n = len(ts)
    parent = np.full(n, -1, dtype=np.int64)
    stack: list[int] = []
    prev_key = None
    ends = (ts + dur).tolist()
    tsl = ts.tolist()
    for i in range(n):
        key = (pid[i], tid[i])
        if key != prev_key:
            stack.clear()
            prev_key = key
        while stack and ends[stack[-1]] <= tsl[i]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    total = values.astype(np.int64).copy()
    for i in range(n - 1, -1, -1):  # children come after their parent in this order
        p = parent[i]
        if p >= 0:
            total[p] += total[i]
    return total
