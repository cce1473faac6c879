"""Interval sets on one time axis: unions, intersections, differences, gaps.

Every wall-time category of the analyses (Computing, Communication, Overlapped, Free, ...) is the
length of an interval set, never a sum of durations that may overlap. An interval set is a pair of
int64 numpy arrays ``(starts, ends)``, sorted, disjoint and non-touching, each interval half-open
``[start, end)`` in nanoseconds. Build one with :func:`union`; every other function takes and
returns such normalised sets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

_EMPTY = np.zeros(0, dtype=np.int64)


def empty() -> Intervals:
    return _EMPTY, _EMPTY


def union(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray) -> Intervals:
    """The union of possibly overlapping intervals ``[starts[i], ends[i])`` as a normalised set.

    Empty or negative intervals are dropped; touching intervals are merged.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    if s.size == 0:
        return empty()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def total(a: Intervals) -> int:
    """Covered length of a normalised set (ns)."""
    return int((a[1] - a[0]).sum())


def _sweep(sets: Sequence[Intervals], weights: Sequence[int], keep: set[int]) -> Intervals:
    """Points where the weighted coverage of the (normalised) sets is one of ``keep``."""
    pts = [x for a in sets for x in (a[0], a[1])]
    deltas: list[np.ndarray] = []
    for a, w in zip(sets, weights):
        deltas.append(np.full(a[0].size, w, dtype=np.int64))
        deltas.append(np.full(a[1].size, -w, dtype=np.int64))
    p = np.concatenate(pts) if pts else _EMPTY
    if p.size == 0:
        return empty()
    d = np.concatenate(deltas)
    order = np.lexsort((d, p))  # by time, ends (negative) before starts at the same instant
    p, d = p[order], d[order]
    level = np.cumsum(d)
    seg_s, seg_e, cov = p[:-1], p[1:], level[:-1]
    m = np.isin(cov, list(keep)) & (seg_e > seg_s)
    return union(seg_s[m], seg_e[m])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Time covered by both sets."""
    if a[0].size == 0 or b[0].size == 0:
        return empty()
    return _sweep([a, b], [1, 2], {3})


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """Time covered by ``a`` and not by ``b``."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    return _sweep([a, b], [1, 2], {1})


def merge(*sets: Intervals) -> Intervals:
    """Union of several normalised sets."""
    nonempty = [a for a in sets if a[0].size]
    if not nonempty:
        return empty()
    if len(nonempty) == 1:
        return nonempty[0]
    return union(np.concatenate([a[0] for a in nonempty]), np.concatenate([a[1] for a in nonempty]))


def clip(a: Intervals, lo: int, hi: int) -> Intervals:
    """The part of ``a`` inside ``[lo, hi)``."""
    if a[0].size == 0 or hi <= lo:
        return empty()
    i = np.searchsorted(a[1], lo, side="right")
    j = np.searchsorted(a[0], hi, side="left")
    s = np.maximum(a[0][i:j], lo)
    e = np.minimum(a[1][i:j], hi)
    keep = e > s
    return s[keep], e[keep]


def gaps(a: Intervals, lo: int, hi: int) -> Intervals:
    """The parts of ``[lo, hi)`` that ``a`` does not cover (idle gaps)."""
    if hi <= lo:
        return empty()
    c = clip(a, lo, hi)
    starts = np.concatenate([[lo], c[1]]).astype(np.int64)
    ends = np.concatenate([c[0], [hi]]).astype(np.int64)
    keep = ends > starts
    return starts[keep], ends[keep]


def span(a: Intervals) -> tuple[int, int] | None:
    """(first start, last end) of a non-empty set, else None."""
    if a[0].size == 0:
        return None
    return int(a[0][0]), int(a[1][-1])


def nesting_depths(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Nesting depth of each slice of a lane sorted by (start, -duration): how many earlier slices
    are still open at its start (its ancestors, for properly nested slices). Vectorised:
    depth_i = i - #{j < i : end_j <= start_i}."""
    n = ts.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    end = ts + dur
    closed = np.searchsorted(np.sort(end), ts, side="right")  # every j with end_j <= start_i ...
    # ... minus those at or after i: instants starting at start_i (sorted last among equal starts)
    zero_starts = ts[dur == 0]
    if zero_starts.size:
        zeros_here = np.searchsorted(zero_starts, ts, side="right") - np.searchsorted(zero_starts, ts, side="left")
        group_end = np.searchsorted(ts, ts, side="right")
        i = np.arange(n)
        after = np.where(dur == 0, group_end - i, zeros_here)
        closed = closed - after
    return np.clip(np.arange(n) - closed, 0, None)
