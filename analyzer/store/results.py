"""Results computed from a run's content, kept in memory by the process that computed them.

The analyses and the web app keep what they computed in a :class:`ResultCache` under a key that
holds ``runs.run_key`` (the content of the run: its fact files get fresh names on every ingest), so
a value is never served after the run changed. The least recently used entry leaves first; a caller
asking for a value another thread is computing waits for it instead of computing it again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any


class ResultCache:
    """At most ``size`` values by key, least recently used out first; thread-safe."""

    def __init__(self, size: int):
        self.size = size
        self.lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._inflight: dict[Hashable, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self.lock:
            self._values.clear()

    def _put(self, key: Hashable, value: Any) -> None:  # under self.lock
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.size:
            self._values.popitem(last=False)

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
                with self.lock:
                    self._put(key, value)
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
            with self.lock:
                for k in missing:
                    out[k] = got.get(k)
                    self._put(k, out[k])
        return out


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
