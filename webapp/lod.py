"""Level of detail for the timeline: per-lane indexes that answer "how busy is this lane in each of
N buckets of a window, and how many events start there" in microseconds, whatever the window.

A lane's index holds the sorted start times of all its slices and the union of its slices as
disjoint intervals with a prefix sum of their lengths, so the covered length up to any time ``t``
is one binary search away. Indexes are built from the slices of one collection (read by
``webapp.data``, the only module with SQL) and kept in a size-bounded LRU keyed by the Parquet file
they came from: a re-ingest writes a new file under a new name, so a stale index is never used.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

DEFAULT_BUDGET_BYTES = int(os.environ.get("RANKSCOPE_WEB_CACHE_MB", "768")) * (1 << 20)


@dataclass(frozen=True)
class LaneIndex:
    """One lane (pid, tid) of one collection."""

    starts: np.ndarray  # int64, sorted start of every slice
    ends: np.ndarray  # int64, sorted end of every slice
    max_dur: int  # longest slice (bounds "started before the window but still running")
    union_a: np.ndarray  # int64, disjoint covered intervals [a, b), sorted
    union_b: np.ndarray
    cum: np.ndarray  # int64, covered length before each interval (len = n + 1)

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes + self.ends.nbytes + self.union_a.nbytes + self.union_b.nbytes + self.cum.nbytes)

    def covered_until(self, t: np.ndarray) -> np.ndarray:
        """Covered length of the lane in (-inf, t) for each t (int64 array)."""
        k = np.searchsorted(self.union_a, t, side="right") - 1
        kk = np.clip(k, 0, None)
        inside = (
            np.clip(t - self.union_a[kk], 0, self.union_b[kk] - self.union_a[kk])
            if len(self.union_a)
            else np.zeros_like(t)
        )
        out = np.where(k >= 0, self.cum[kk] + inside, 0)
        return out

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """Covered length per bucket [edges[i], edges[i+1])."""
        if len(self.union_a) == 0:
            return np.zeros(len(edges) - 1, dtype=np.int64)
        return np.diff(self.covered_until(edges))

    def starts_per_bucket(self, edges: np.ndarray) -> np.ndarray:
        return np.diff(np.searchsorted(self.starts, edges, side="left"))

    def overlapping(self, start: int, end: int) -> int:
        """Slices overlapping [start, end): started before ``end`` and not ended before ``start``
        (an instant at ``start`` counts)."""
        return int(np.searchsorted(self.starts, end, side="left") - np.searchsorted(self.ends, start, side="left"))


def build_lane(ts: np.ndarray, dur: np.ndarray) -> LaneIndex:
    """Index of one lane from its slices' starts and durations (any order)."""
    ts = np.asarray(ts, dtype=np.int64)
    dur = np.clip(np.asarray(dur, dtype=np.int64), 0, None)
    if ts.size > 1 and not (ts[1:] >= ts[:-1]).all():
        order = np.argsort(ts, kind="stable")  # timsort: fast on the nearly sorted order of traces
        ts, dur = ts[order], dur[order]
    end = ts + dur
    keep = dur > 0
    a, e = ts[keep], end[keep]
    if a.size:
        reach = np.maximum.accumulate(e)
        new = np.empty(a.size, dtype=bool)
        new[0] = True
        new[1:] = a[1:] > reach[:-1]
        idx = np.flatnonzero(new)
        ua = a[idx]
        ub = np.maximum.reduceat(e, idx)
    else:
        ua = ub = np.zeros(0, dtype=np.int64)
    cum = np.zeros(len(ua) + 1, dtype=np.int64)
    np.cumsum(ub - ua, out=cum[1:])
    return LaneIndex(ts, np.sort(end, kind="stable"), int(dur.max()) if dur.size else 0, ua, ub, cum)


class LaneCache:
    """Size-bounded LRU of lane indexes per source (one slices file of one collection)."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.budget = budget_bytes
        self._items: OrderedDict[str, dict[tuple[str, str], LaneIndex]] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, source: str) -> dict[tuple[str, str], LaneIndex] | None:
        with self._lock:
            v = self._items.get(source)
            if v is not None:
                self._items.move_to_end(source)
            return v

    def put(self, source: str, lanes: dict[tuple[str, str], LaneIndex]) -> None:
        size = sum(x.nbytes for x in lanes.values()) + 256
        with self._lock:
            self._items[source] = lanes
            self._sizes[source] = size
            self._items.move_to_end(source)
            while sum(self._sizes.values()) > self.budget and len(self._items) > 1:
                old, _ = self._items.popitem(last=False)
                self._sizes.pop(old, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()

    @property
    def nbytes(self) -> int:
        return sum(self._sizes.values())


def index_groups(keys: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> dict[int, LaneIndex]:
    """Indexes for many lanes at once: ``keys`` holds a lane number per slice."""
    if len(keys) == 0:
        return {}
    if (keys[1:] >= keys[:-1]).all():
        k, t, d = keys, ts, dur
    else:
        small = keys.astype(np.uint16) if keys.max() < 65536 and keys.min() >= 0 else keys
        order = np.argsort(small, kind="stable")  # radix sort for 16-bit keys
        k, t, d = keys[order], ts[order], dur[order]
    cuts = np.flatnonzero(np.diff(k)) + 1
    out: dict[int, LaneIndex] = {}
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(k)]):
        out[int(k[lo])] = build_lane(t[lo:hi], d[lo:hi])
    return out
