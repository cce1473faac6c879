"""The step of a moment: which step range holds a timestamp, or which step last started before it.

``steps`` are ``(step, start ns, end ns)`` tuples, as every reader collects them (ProfilerStep
ranges, msprof iterations, STEP_TIME rows, step_trace files). The many-times forms take a list,
a numpy array or an Arrow array of ns (null / None: no step) and work with numpy, not per time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Times = Sequence[int | None] | np.ndarray | pa.Array | pa.ChunkedArray


def step_containing(steps: list[tuple[int, int, int]], ts: int | None) -> int | None:
    """The first step (in the order of ``steps``) whose [start, end) holds ``ts``; None outside every step."""
    if ts is None:
        return None
    for step, s, e in steps:
        if s <= ts < e:
            return step
    return None


def _ns(ts: Times) -> tuple[np.ndarray, np.ndarray]:
    """(int64 times with 0 for missing, validity) of ``ts``."""
    if isinstance(ts, np.ndarray):
        return ts.astype(np.int64, copy=False), np.ones(len(ts), dtype=bool)
    arr = ts if isinstance(ts, (pa.Array, pa.ChunkedArray)) else pa.array(ts, pa.int64())
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(len(arr), dtype=bool)
    values = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return values, valid


def _as_list(step: np.ndarray, hit: np.ndarray) -> list[int | None]:
    return pa.array(step, pa.int64(), mask=~hit).to_pylist()


def steps_containing(steps: list[tuple[int, int, int]], ts: Times) -> list[int | None]:
    """``step_containing`` of many times at once: binary search over the steps by start; when ranges
    overlap, the one that starts first among the eight that start last before the time (ranges are
    disjoint in practice)."""
    t, valid = _ns(ts)
    out = np.zeros(len(t), dtype=np.int64)
    hit = np.zeros(len(t), dtype=bool)
    if not steps or not len(t):
        return _as_list(out, hit)
    ordered = sorted(steps, key=lambda s: s[1])
    step = np.array([s[0] for s in ordered], dtype=np.int64)
    start = np.array([s[1] for s in ordered], dtype=np.int64)
    end = np.array([s[2] for s in ordered], dtype=np.int64)
    i = np.searchsorted(start, t, side="right")
    for back in range(1, 9):  # nearest first; a farther (earlier-starting) range that holds t wins
        j = i - back
        ok = (j >= 0) & valid
        jj = np.maximum(j, 0)
        ok &= t < end[jj]
        out[ok] = step[jj[ok]]
        hit |= ok
    return _as_list(out, hit)


def last_step_started(steps: list[tuple[int, int, int]], ts: Times) -> list[int | None]:
    """The step of each device task: the last step (``steps`` sorted by start) started at or before
    it (device work lags the host)."""
    t, valid = _ns(ts)
    if not steps or not len(t):
        return [None] * len(t)
    step = np.array([s[0] for s in steps], dtype=np.int64)
    start = np.array([s[1] for s in steps], dtype=np.int64)
    i = np.searchsorted(start, t, side="right")
    hit = (i > 0) & valid
    return _as_list(step[np.maximum(i - 1, 0)], hit)
