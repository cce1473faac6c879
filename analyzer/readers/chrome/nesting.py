"""Nesting of host operators on a thread: depth and self (exclusive) time.

Shared by every reader that builds the ``operators`` table from ranges (Kineto ``cpu_op``, torch_npu
``trace_view.json`` and ``PYTORCH_API``, MindSpore host ops): an op is the child of the latest op
still running on its thread when it starts; its self time is its duration minus its direct
children's, a child that outlives its parent being clipped to the parent's end.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def self_time(ops: pa.Table) -> pa.Table:
    """Depth and self time of nested host ops, per thread.

    ``ops`` has columns ``_pid``, ``tid``, ``ts_ns``, ``dur_ns``, ``event_id`` and is sorted by
    (pid, tid, ts, -dur). Returns ``event_id``, ``depth``, ``self_ns``.
    """
    ts = pc.fill_null(ops.column("ts_ns"), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    dur = pc.fill_null(ops.column("dur_ns"), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    depth, self_ns = depth_and_self(thread_runs(ops.column("_pid"), ops.column("tid")), ts, dur)
    return pa.table({"event_id": ops.column("event_id"), "depth": depth, "self_ns": self_ns})


def thread_runs(pid: pa.ChunkedArray | pa.Array, tid: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A number per row that changes exactly where (pid, tid) changes (rows grouped by thread)."""
    n = len(pid)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    key = pc.binary_join_element_wise(
        pc.fill_null(pc.cast(pid, pa.string()), ""), pc.fill_null(pc.cast(tid, pa.string()), ""), "\x00"
    )
    key = key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key
    change = np.ones(n, dtype=np.int64)
    if n > 1:
        same = pc.equal(key.slice(1), key.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        change[1:] = ~same
    return np.cumsum(change)


def depth_and_self(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth and self time of host ops sorted by (thread, start, longest first).

    The rule is a stack walk per thread: an op is the child of the latest op still running when it
    starts (running = its end is after the child's start); self time is the duration minus the
    children's, a child that outlives its parent being clipped to the parent's end. The walk's
    stack is empty wherever an op starts after every earlier op of its thread ended: there a
    thread falls into independent stretches (a training step, usually). The stretches whose ops are
    properly nested (most) are computed with numpy and checked, all at once; only a stretch with
    overlapping ops takes the walk itself (one op outliving its parent no longer sends the whole
    thread, a million ops, through a Python loop).
    """
    n = len(ts)
    depth = np.zeros(n, dtype=np.int32)
    child = np.zeros(n, dtype=np.int64)
    if n:
        bounds = np.concatenate(([0], np.flatnonzero(thread[1:] != thread[:-1]) + 1, [n]))
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            _thread(ts[a:b], dur[a:b], depth[a:b], child[a:b])
    return depth, np.maximum(dur - child, 0)


def _thread(ts: np.ndarray, dur: np.ndarray, depth: np.ndarray, child: np.ndarray) -> None:
    """Depth and children's time of one thread's ops (written into ``depth`` and ``child``)."""
    if len(ts) == 0:
        return
    if dur.min() < 0:  # an end before the start: the counting below does not hold
        _walk_thread(ts, dur, depth, child)
        return
    end = ts + dur
    # stretch number of each op: a new one where the op starts after every earlier op ended
    before = np.maximum.accumulate(end)
    fresh = np.ones(len(ts), dtype=bool)
    fresh[1:] = ts[1:] >= before[:-1]
    stretch = np.cumsum(fresh) - 1
    d, parent, bad = _nesting(ts, dur, end, stretch)
    walk = np.zeros(int(stretch[-1]) + 1, dtype=bool)
    walk[stretch[bad]] = True
    nested = ~walk[stretch]
    depth[nested] = d[nested]
    kids = np.flatnonzero(nested & (parent >= 0))
    np.add.at(child, parent[kids], dur[kids])
    if walk.any():
        firsts = np.flatnonzero(fresh)
        lasts = np.append(firsts[1:], len(ts))
        for s in np.flatnonzero(walk).tolist():
            a, b = int(firsts[s]), int(lasts[s])
            _walk_thread(ts[a:b], dur[a:b], depth[a:b], child[a:b])


def _nesting(
    ts: np.ndarray, dur: np.ndarray, end: np.ndarray, stretch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised stack walk of ops with no negative duration, as if properly nested: (depth,
    parent position or -1, True where an op's nesting does not check out — its stretch is not
    properly nested). In a properly nested stretch, every parent is still running when its child
    starts, outlasts it, and lies in the child's stretch."""
    m = len(ts)
    zero = dur == 0
    # ops started before op i that are still running at ts[i]: i - (zero-length ones, which end at
    # once) - (positive ones ended by ts[i]; a later-starting positive op cannot have ended yet)
    zeros_before = np.cumsum(zero) - zero
    pos_ends = np.sort(end[~zero])
    d = np.arange(m) - zeros_before - np.searchsorted(pos_ends, ts, side="right")
    bad = d < 0
    d = np.where(bad, -1, d)
    parent = np.full(m, -1, dtype=np.int64)
    order = np.argsort(d, kind="stable")  # positions grouped by depth, ascending within a depth
    dsorted = d[order]
    top = int(dsorted[-1])
    starts = np.searchsorted(dsorted, np.arange(top + 2))
    for lvl in range(1, top + 1):
        kids = order[starts[lvl] : starts[lvl + 1]]
        ups = order[starts[lvl - 1] : starts[lvl]]
        k = np.searchsorted(ups, kids) - 1
        found = k >= 0
        bad[kids[~found]] = True
        parent[kids[found]] = ups[k[found]]
    kids = np.flatnonzero(parent >= 0)
    par = parent[kids]
    wrong = (stretch[par] != stretch[kids]) | (end[par] <= ts[kids]) | (end[kids] > end[par])
    bad[kids[wrong]] = True
    return d, parent, bad


def _walk_thread(ts: np.ndarray, dur: np.ndarray, depth: np.ndarray, child: np.ndarray) -> None:
    """The stack walk itself (for threads with overlapping ops)."""
    ends = (ts + dur).tolist()
    tsl = ts.tolist()
    stack: list[int] = []
    for i in range(len(tsl)):
        t = tsl[i]
        while stack and ends[stack[-1]] <= t:
            stack.pop()
        if stack:
            p = stack[-1]
            depth[i] = len(stack)
            # clip a child that outlives its parent (async / imprecise ends) to the parent's end
            child[p] += min(ends[i], ends[p]) - t
        stack.append(i)


def subtree_sum(
    pid: list[str | None], tid: list[str | None], ts: np.ndarray, dur: np.ndarray, values: np.ndarray
) -> np.ndarray:
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
