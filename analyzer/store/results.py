"""Results computed from a run's content, kept in memory by the process that computed them.

The analyses and the web app keep what they computed in a :class:`ResultCache` under a key that
holds ``runs.run_key`` (the content of the run: its fact files get fresh names on every ingest), so
a value is never served after the run changed. The least recently used entry leaves first, when
there are more than ``size`` entries or their estimated bytes (:func:`nbytes`) pass the cache's
``budget``: a value of a whole run (every rank's rows) grows with the ranks, so a count alone does
not bound the memory. A caller asking for a value another thread is computing waits for it instead
of computing it again.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any


class ResultCache:
    """At most ``size`` values by key and about ``budget`` bytes (as ``measure`` counts them, by
    default :func:`nbytes`; None: no bound but the count), least recently used out first (the newest
    value stays, however large); thread-safe."""

    def __init__(self, size: int, budget: int | None = None, measure: Callable[[Any], int] | None = None):
        self.size = size
        self.budget = budget
        self.measure = measure or nbytes
        self.lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._bytes = 0
        self._inflight: dict[Hashable, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._values)

    @property
    def nbytes(self) -> int:
        """The estimated bytes of the values kept."""
        return self._bytes

    def clear(self) -> None:
        with self.lock:
            self._values.clear()
            self._sizes.clear()
            self._bytes = 0

    def _put(self, key: Hashable, value: Any, size: int) -> None:  # under self.lock
        self._bytes += size - self._sizes.get(key, 0)
        self._values[key], self._sizes[key] = value, size
        self._values.move_to_end(key)
        while len(self._values) > 1 and (
            len(self._values) > self.size or (self.budget is not None and self._bytes > self.budget)
        ):
            old, _ = self._values.popitem(last=False)
            self._bytes -= self._sizes.pop(old)

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of ``key``: cached, or computed once by ``compute()`` (another caller of the same
        key meanwhile waits for it; when that computation fails, the waiter computes, and raises, itself)."""
        while True:
            with self.lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]
                busy = self._inflight.get(key)
                mine = busy is None
                if mine:
                    busy = self._inflight[key] = threading.Lock()
                    busy.acquire()
            if not mine:
                with busy:  # wait for the other computation, then look again
                    pass
                with self.lock:
                    if key in self._values or key in self._inflight:
                        continue
                return compute()
            try:
                value = compute()
                size = self.measure(value) if self.budget is not None else 0
                with self.lock:
                    self._put(key, value, size)
                return value
            finally:
                with self.lock:
                    self._inflight.pop(key, None)
                busy.release()

    def get_many(
        self, keys: Iterable[Hashable], load: Callable[[list[Hashable]], dict[Hashable, Any]]
    ) -> dict[Hashable, Any]:
        """The values of several keys: the missing ones from one ``load(missing) -> {key: value}``
        call (a key ``load`` leaves out is cached as None)."""
        out: dict[Hashable, Any] = {}
        missing: list[Hashable] = []
        with self.lock:
            for k in keys:
                if k in self._values:
                    self._values.move_to_end(k)
                    out[k] = self._values[k]
                else:
                    missing.append(k)
        if missing:
            got = load(missing)
            sizes = {k: self.measure(got.get(k)) if self.budget is not None else 0 for k in missing}
            with self.lock:
                for k in missing:
                    out[k] = got.get(k)
                    self._put(k, out[k], sizes[k])
        return out


_DEEP_ROWS = 2000  # a frame's text columns are measured on this many rows, the rest extrapolated


def nbytes(v: Any, _depth: int = 0) -> int:
    """About how many bytes ``v`` holds: DataFrames and Series (their text cells measured on a
    sample of rows), numpy arrays, Arrow tables and arrays, and containers of them; other objects
    as ``sys.getsizeof`` (or their own ``nbytes``)."""
    kind = type(v).__name__
    if kind == "DataFrame":  # pandas is not imported by this module
        return int(v.index.memory_usage(deep=True)) + sum(_column_bytes(c) for _, c in v.items())
    if kind == "Series":
        return int(v.index.memory_usage(deep=True)) + _column_bytes(v)
    if _depth < 4 and isinstance(v, (list, tuple, set, frozenset)):
        return sys.getsizeof(v) + sum(nbytes(x, _depth + 1) for x in v)
    if _depth < 4 and isinstance(v, dict):
        return sys.getsizeof(v) + sum(nbytes(k, _depth + 1) + nbytes(x, _depth + 1) for k, x in v.items())
    size = getattr(v, "nbytes", None)  # numpy, Arrow, the timeline's lane indexes
    if callable(size):
        size = size()
    if isinstance(size, int):
        return size
    return sys.getsizeof(v)


def _column_bytes(col: Any) -> int:
    """One column's bytes as ``memory_usage(deep=True)`` counts them (the cells of an object column
    measured on its first ``_DEEP_ROWS``, the rest extrapolated), without the Series of counts that
    ``memory_usage`` builds: on the small frames of a report that cost ~2 ms a frame."""
    if col.dtype != object:
        return int(col.array.nbytes)
    cells = col.to_numpy()
    n, head = len(cells), cells[:_DEEP_ROWS]
    return int(cells.nbytes) + (sum(map(sys.getsizeof, head)) * n // len(head) if n else 0)


def freeze(v: Any) -> Hashable:
    """A hashable stand-in for an argument (lists and sets become tuples, dicts sorted item tuples)."""
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    if isinstance(v, (set, frozenset)):
        return tuple(sorted((freeze(x) for x in v), key=repr))
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    return v


def copied(v: Any) -> Any:
    """What a caller gets of a cached value: its own copy of every DataFrame (in a tuple too);
    other values are shared (treat them as read-only)."""
    if type(v).__name__ == "DataFrame":  # pandas is not imported by this module
        return v.copy()
    if isinstance(v, tuple):
        return tuple(copied(x) for x in v)
    return v
