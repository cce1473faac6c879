"""What the server keeps in memory between requests, and why it is never stale.

- ``RESULTS``: results of the data functions marked :func:`run_cached` and per-rank values
  (:func:`per_rank`), at most ``RESULTS_SIZE`` entries, least recently used first out. A key holds
  the store, the run, the function, its arguments and the content of the run
  (``analyzer.store.run_key``: its fact files get fresh names on every ingest), so a run committed by
  a concurrent ``analyze ingest`` is seen on the next request. A request asking for a value another
  request (or the warm-up) is computing waits for it instead of computing it again.
- ``LANES``: the timeline's level-of-detail indexes (``lod.LaneCache``, bounded in bytes), keyed by
  the slices files they were built from (fresh names on every ingest too).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from . import lod
from .reader import Reader

RESULTS_SIZE = 256

_results: dict[tuple[Any, ...], Any] = {}  # insertion order = least recently used first
_inflight: dict[tuple[Any, ...], threading.Lock] = {}
lock = threading.Lock()  # guards _results and _inflight (and the warm-up's set of started runs)

LANES = lod.LaneCache()


def _trim() -> None:
    while len(_results) > RESULTS_SIZE:
        _results.pop(next(iter(_results)))


def cached(rd: Reader, run: str, name: str, args: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    """``compute()`` once per key and content of the run; a request arriving while the same value
    is being computed (by another request or the warm-up) waits for it instead of redoing it."""
    key = (str(rd.store.path), run, name, args, rd.run_key(run))
    while True:
        with lock:
            if key in _results:
                value = _results.pop(key)
                _results[key] = value  # most recently used last
                return value
            busy = _inflight.get(key)
            mine = busy is None
            if mine:
                busy = _inflight[key] = threading.Lock()
                busy.acquire()
        if not mine:
            with busy:  # wait for the other computation, then read the cache
                pass
            with lock:
                if key in _results or key in _inflight:
                    continue
            return compute()  # the other computation failed: compute here (and raise its error)
        try:
            value = compute()
            with lock:
                _results[key] = value
                _trim()
            return value
        finally:
            with lock:
                _inflight.pop(key, None)
            busy.release()


def per_rank(
    rd: Reader,
    run: str,
    name: str,
    ranks: Iterable[int],
    extra: tuple[Any, ...],
    load: Callable[[list[int]], dict[int, Any]],
) -> dict[int, Any]:
    """Per-rank values cached one rank at a time: ``load(missing_ranks) -> {rank: value}`` is
    called once for all ranks not cached yet (one query instead of one per rank)."""
    out: dict[int, Any] = {}
    missing: list[int] = []
    content = rd.run_key(run)
    base = (str(rd.store.path), run, name)
    with lock:
        for r in ranks:
            key = (*base, (int(r), *extra), content)
            if key in _results:
                out[int(r)] = _results[key]
            else:
                missing.append(int(r))
    if missing:
        got = load(missing)
        with lock:
            for r in missing:
                out[r] = got.get(r)
                _results[(*base, (r, *extra), content)] = out[r]
            _trim()
    return out


def freeze(v: Any) -> Any:
    """A hashable stand-in for an argument (lists and dicts become tuples)."""
    if isinstance(v, (list, tuple, set, frozenset)):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    return v


def copy(v: Any) -> Any:
    """What a caller gets of a cached value: its own copy of every DataFrame."""
    if isinstance(v, pd.DataFrame):
        return v.copy()
    if isinstance(v, tuple):
        return tuple(copy(x) for x in v)
    return v


def run_cached(fn: Callable[..., Any]) -> Any:
    """Cache a ``fn(rd, run, *args)`` result per content of the run (see the module doc);
    ``fn.uncached`` is the function itself."""

    @functools.wraps(fn)
    def wrapper(rd: Reader, run: str, *args: Any, **kw: Any) -> Any:
        key = (freeze(args), freeze(kw))
        return copy(cached(rd, run, fn.__name__, key, lambda: fn(rd, run, *args, **kw)))

    wrapper.uncached = fn  # type: ignore[attr-defined]
    return wrapper
