"""Level of detail for the timeline: per-lane indexes that answer, in microseconds whatever the
window, "how busy is this lane in each of N buckets" and "which slices of this lane overlap
[a, b) and last at least d".

A lane's index holds

- the union of its slices as disjoint intervals with a prefix sum of their lengths, so the covered
  length up to any time is one binary search away (occupancy per bucket);
- every slice (start, duration, nesting depth, name code, event id), grouped by *duration class*
  (class k holds durations in [2^(k-1), 2^k), class 0 the instants) and sorted by start within a
  class. A slice of class k that overlaps [a, b) starts in [a - 2^k, b), so "the slices of at least
  d ns overlapping [a, b)" is one binary search per class that can hold them: the answer costs its
  own size, not the lane's.

Indexes are built from the slices of one collection (read by ``webapp.data``, the only module with
SQL) and kept in a size-bounded LRU keyed by the Parquet files they came from: a re-ingest writes
new files under new names, so a stale index is never used.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analyzer.breakdown import intervals as iv

DEFAULT_BUDGET_BYTES = int(os.environ.get("RANKSCOPE_WEB_CACHE_MB", "768")) * (1 << 20)
N_CLASSES = 64  # class 0: instants; class k: durations in [2^(k-1), 2^k)
MAX_DEPTH = 255  # depths are stored as uint8: deeper slices share the last level
KEY_SHIFT = 56  # LaneIndex.keys: class in the bits above, ns after the lane's first start below


@dataclass(frozen=True)
class LaneIndex:
    """One lane (pid, tid) of one collection."""

    starts: np.ndarray  # int64, slice starts, in (class, start) order
    durs: np.ndarray  # int64, durations (>= 0), same order
    depth: np.ndarray  # uint8, nesting level on the lane (number of slices still open at the start)
    names: np.ndarray  # uint16 / int32, code of the name in the collection's ``names``
    events: np.ndarray  # int32 / int64, event_id (the slice's key in the store)
    class_lo: np.ndarray  # int64[N_CLASSES + 1]: class k is rows class_lo[k]:class_lo[k + 1]
    union_a: np.ndarray  # int64, disjoint covered intervals [a, b), sorted
    union_b: np.ndarray
    cum: np.ndarray  # int64, covered length before each interval (len = n + 1)
    first_ns: int  # earliest start (0 when the lane is empty)
    last_ns: int  # latest end
    max_depth: int
    classes: tuple[int, ...] = ()  # the classes holding slices
    # (class << KEY_SHIFT) + start - first_ns per row: sorted, so one binary search finds every class's
    # bounds at once (``select``); None when the lane spans 2^KEY_SHIFT ns or more (then class by class)
    keys: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.starts.size)

    @property
    def nbytes(self) -> int:
        arrays = (self.starts, self.durs, self.depth, self.names, self.events, self.union_a, self.union_b, self.cum)
        return int(sum(a.nbytes for a in arrays)) + (0 if self.keys is None else int(self.keys.nbytes))

    # -- occupancy ---------------------------------------------------------------------------

    def covered_until(self, t: np.ndarray) -> np.ndarray:
        """Covered length of the lane in (-inf, t) for each t (int64 array)."""
        if len(self.union_a) == 0:
            return np.zeros_like(t)
        k = np.searchsorted(self.union_a, t, side="right") - 1
        kk = np.maximum(k, 0)
        a = self.union_a[kk]
        inside = np.minimum(np.maximum(t - a, 0), self.union_b[kk] - a)
        out = self.cum[kk] + inside
        out[k < 0] = 0
        return out

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """Covered length per bucket [edges[i], edges[i+1])."""
        if len(self.union_a) == 0:
            return np.zeros(len(edges) - 1, dtype=np.int64)
        return np.diff(self.covered_until(edges))

    def instants_per_bucket(self, edges: np.ndarray) -> np.ndarray:
        """Instant events (duration 0) per bucket [edges[i], edges[i+1])."""
        lo, hi = self.class_lo[0], self.class_lo[1]
        return np.diff(np.searchsorted(self.starts[lo:hi], edges, side="left"))

    def starts_per_bucket(self, edges: np.ndarray) -> np.ndarray:
        """Slices starting in each bucket [edges[i], edges[i+1])."""
        out = np.zeros(len(edges) - 1, dtype=np.int64)
        for k in self._classes():
            lo, hi = self.class_lo[k], self.class_lo[k + 1]
            out += np.diff(np.searchsorted(self.starts[lo:hi], edges, side="left"))
        return out

    # -- slices ------------------------------------------------------------------------------

    def _classes(self) -> tuple[int, ...]:
        return self.classes

    def select(self, start: int, end: int, min_dur: int = 1) -> np.ndarray:
        """Rows of the slices overlapping [start, end) that last at least ``min_dur`` ns (an instant
        overlaps when start <= t < end; ``min_dur`` <= 0 includes the instants), in class order."""
        if self.keys is None:
            return self._select_by_class(start, end, min_dur)
        ks = np.asarray([k for k in self.classes if k and (1 << k) - 1 >= min_dur], dtype=np.int64)
        parts = []
        if min_dur <= 0 and 0 in self.classes:  # instants: start <= t < end
            lo, hi = self.class_lo[0], self.class_lo[1]
            s = self.starts[lo:hi]
            a0, b0 = np.searchsorted(s, start, side="left"), np.searchsorted(s, end, side="left")
            parts.append(np.arange(lo + a0, lo + b0, dtype=np.int64))
        if ks.size:
            # a slice of class k overlapping [start, end) starts in (start - (2^k - 1), end): both bounds
            # of every class in one search over the (class, start) keys
            top = (1 << KEY_SHIFT) - 1
            rel_a = np.minimum(np.maximum(start - ((1 << ks) - 1) - self.first_ns, -1), top)
            rel_b = min(max(end - self.first_ns, 0), top)
            base = ks << KEY_SHIFT
            a = np.searchsorted(self.keys, base + rel_a, side="right")
            b = np.searchsorted(self.keys, base + rel_b, side="left")
            n = np.maximum(b - a, 0)
            total = int(n.sum())
            if total:
                # the rows a[i]:b[i] of every class, concatenated
                rows = np.repeat(a - np.cumsum(n) + n, n) + np.arange(total, dtype=np.int64)
                ok = self.starts[rows] + self.durs[rows] > start
                if min_dur > 1:
                    ok &= self.durs[rows] >= min_dur
                parts.append(rows[ok])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(parts).astype(np.int64, copy=False)

    def _select_by_class(self, start: int, end: int, min_dur: int) -> np.ndarray:
        """``select`` one class at a time (a lane too long for ``keys``)."""
        parts = []
        for k in self._classes():
            if k == 0:
                if min_dur > 0:
                    continue
                lo, hi = self.class_lo[0], self.class_lo[1]
                s = self.starts[lo:hi]
                a, b = np.searchsorted(s, start, side="left"), np.searchsorted(s, end, side="left")
                parts.append(np.arange(lo + a, lo + b, dtype=np.int64))
                continue
            longest = (1 << k) - 1  # longest duration of the class
            if longest < min_dur:
                continue
            lo, hi = self.class_lo[k], self.class_lo[k + 1]
            s = self.starts[lo:hi]
            a = np.searchsorted(s, start - longest, side="right")
            b = np.searchsorted(s, end, side="left")
            if b <= a:
                continue
            rows = np.arange(lo + a, lo + b, dtype=np.int64)
            ok = self.starts[rows] + self.durs[rows] > start
            if min_dur > (1 << (k - 1)):
                ok &= self.durs[rows] >= min_dur
            parts.append(rows[ok])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(parts)

    def count_instants(self, start: int, end: int) -> int:
        lo, hi = self.class_lo[0], self.class_lo[1]
        s = self.starts[lo:hi]
        return int(np.searchsorted(s, end, side="left") - np.searchsorted(s, start, side="left"))

    def overlapping(self, start: int, end: int) -> int:
        """Number of slices overlapping [start, end) (instants included)."""
        return int(self.select(start, end, 0).size)


def duration_classes(dur: np.ndarray) -> np.ndarray:
    """Duration class of each slice: 0 for an instant, else the bit length of the duration."""
    out = np.zeros(dur.size, dtype=np.int64)
    pos = dur > 0
    if pos.any():
        _, exp = np.frexp(dur[pos].astype(np.float64))  # d = m * 2^exp, 0.5 <= m < 1: exp = bit_length(d)
        out[pos] = exp
        # float64 rounds durations above 2^53 up to the next power of two: fix the bit length there
        big = pos.copy()
        big[pos] = dur[pos] >= (1 << 53)
        if big.any():
            out[big] = [int(d).bit_length() for d in dur[big]]
    return out


def build_lane(
    ts: np.ndarray, dur: np.ndarray, names: np.ndarray | None = None, events: np.ndarray | None = None
) -> LaneIndex:
    """Index of one lane from its slices' starts and durations (any order), name codes and event ids."""
    ts = np.asarray(ts, dtype=np.int64)
    dur = np.clip(np.asarray(dur, dtype=np.int64), 0, None)
    names = np.zeros(ts.size, dtype=np.uint16) if names is None else np.asarray(names)
    events = np.arange(ts.size, dtype=np.int64) if events is None else np.asarray(events)
    if ts.size > 1:
        order = np.lexsort((-dur, ts))  # by start, the longer (enclosing) slice first
        ts, dur, names, events = ts[order], dur[order], names[order], events[order]
    depth = np.minimum(iv.nesting_depths(ts, dur), MAX_DEPTH).astype(np.uint8)
    # occupancy: union of the slices with a length
    keep = dur > 0
    a, e = ts[keep], (ts + dur)[keep]
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
    # slices grouped by duration class, by start within a class (a stable sort keeps the start order)
    cls = duration_classes(dur)
    by_class = np.argsort(cls, kind="stable")
    class_lo = np.searchsorted(cls[by_class], np.arange(N_CLASSES + 1), side="left").astype(np.int64)
    first = int(ts[0]) if ts.size else 0
    last = int((ts + dur).max()) if ts.size else 0
    starts = ts[by_class]
    keys = None
    if not ts.size or int(ts[-1]) - first < 1 << KEY_SHIFT:
        keys = (cls[by_class].astype(np.int64) << KEY_SHIFT) + (starts - first)
    return LaneIndex(
        starts=starts,
        durs=dur[by_class],
        depth=depth[by_class],
        names=names[by_class],
        events=events[by_class],
        class_lo=class_lo,
        union_a=ua,
        union_b=ub,
        cum=cum,
        first_ns=first,
        last_ns=last,
        max_depth=int(depth.max()) if depth.size else 0,
        classes=tuple(int(k) for k in np.flatnonzero(np.diff(class_lo))),
        keys=keys,
    )


@dataclass(frozen=True)
class CollectionIndex:
    """The lane indexes of one collection, and the names their codes point into."""

    lanes: dict[tuple[str, str], LaneIndex]  # by (pid, tid)
    names: Sequence[str]

    @property
    def nbytes(self) -> int:
        return sum(x.nbytes for x in self.lanes.values()) + 64 * len(self.names) + 256


class LaneCache:
    """Size-bounded LRU of collection indexes per source (the slices files of one collection)."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.budget = budget_bytes
        self._items: OrderedDict[str, CollectionIndex] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, source: str) -> CollectionIndex | None:
        with self._lock:
            v = self._items.get(source)
            if v is not None:
                self._items.move_to_end(source)
            return v

    def put(self, source: str, index: CollectionIndex) -> None:
        with self._lock:
            self._items[source] = index
            self._sizes[source] = index.nbytes
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


def index_groups(
    keys: np.ndarray, ts: np.ndarray, dur: np.ndarray, names: np.ndarray | None = None, events: np.ndarray | None = None
) -> dict[int, LaneIndex]:
    """Indexes for many lanes at once: ``keys`` holds a lane number per slice."""
    if len(keys) == 0:
        return {}
    names = np.zeros(len(keys), dtype=np.uint16) if names is None else names
    events = np.arange(len(keys), dtype=np.int64) if events is None else events
    if (keys[1:] >= keys[:-1]).all():
        k, t, d, nm, ev = keys, ts, dur, names, events
    else:
        small = keys.astype(np.uint16) if keys.max() < 65536 and keys.min() >= 0 else keys
        order = np.argsort(small, kind="stable")  # radix sort for 16-bit keys
        k, t, d, nm, ev = keys[order], ts[order], dur[order], names[order], events[order]
    cuts = np.flatnonzero(np.diff(k)) + 1
    out: dict[int, LaneIndex] = {}
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(k)]):
        out[int(k[lo])] = build_lane(t[lo:hi], d[lo:hi], nm[lo:hi], ev[lo:hi])
    return out
