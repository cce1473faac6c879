"""What the server keeps in memory between requests, and why it is never stale.

- ``RESULTS`` (``analyzer.store.ResultCache``): results of the data functions marked
  :func:`run_cached` and per-rank values (:func:`per_rank`), least recently used out first. A key
  holds the store, the run, the function, its arguments and the content of the run
  (``analyzer.store.run_key``: its fact files get fresh names on every ingest), so a run committed by
  a concurrent ``analyze ingest`` is seen on the next request. A request asking for a value another
  request (or the warm-up) is computing waits for it. The analyses keep their own results the same
  way (``analyzer.analyses``).
- ``RENDERED``: page parts (Dash components) built by :func:`rendered`, keyed on the catalog's state,
  the inputs and the language: a request with the same inputs gets the part built for the one before
  it (rendering hundreds of ranks' rows and figures costs 0.1-0.3 s of the interpreter, what many
  users asking for the same page queue behind). Few are kept, and about 64 MiB of them
  (:func:`part_bytes`): they are large.
- ``answers.ANSWERS``: whole serialised callback answers (see ``webapp.answers``).
- ``LANES``: the timeline's level-of-detail indexes (``lod.LaneCache``, bounded in bytes), keyed by
  the slices files they were built from (fresh names on every ingest too).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

from dash.development.base_component import Component
from plotly.basedatatypes import BaseFigure

from analyzer.store import ResultCache, copied, freeze, nbytes

from . import lang, lod
from .reader import Reader


def part_bytes(part: Any) -> int:
    """About how many bytes a rendered page part holds: its Dash components and their props, its
    figures' traces and layout (their arrays: ``nbytes``), and the lists and dicts holding them, each
    object counted once (one walk of the part, a small cost next to building it)."""
    seen: set[int] = set()
    total, todo = 0, [part]
    while todo:
        v = todo.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, Component):
            todo.extend(getattr(v, p, None) for p in v._prop_names)
        elif isinstance(v, BaseFigure):
            todo += [v._data, v._layout]
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo += [*v.keys(), *v.values()]
        else:
            total += nbytes(v)
            continue
        total += sys.getsizeof(v)
    return total


# bounded in bytes: a run's values grow with its ranks (at 256 ranks the pages' first views keep
# ~1 MiB here; the budget is for thousands of ranks); the count allows a few per-rank values
# (``per_rank``: the timeline's lanes, steps and counters) of every rank of a 4096-rank run
RESULTS = ResultCache(size=16384, budget=256 << 20)
# parts of a page of many ranks (rows and figures per rank) grow with them: bounded in bytes too
# (part_bytes), so 32 parts of a 4096-rank run cannot hold the server's memory
RENDERED = ResultCache(size=32, budget=64 << 20, measure=part_bytes)
LANES = lod.LaneCache()


def cached(rd: Reader, run: str, name: str, args: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    """``compute()`` once per key and content of the run (shared: treat the value as read-only)."""
    return RESULTS.get((str(rd.store.path), run, name, args, rd.run_key(run)), compute)


def rendered(rd: Reader, name: str, args: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()`` once per catalog state, ``args`` and language (see the module doc); Dash only
    serialises what a callback returns, so requests share it (treat it as read-only). A catalog read
    while a commit wrote builds anew each time."""
    stamp = rd.catalog_stamp()
    if stamp is None:
        return build()
    return RENDERED.get((str(rd.store.path), stamp, name, freeze(args), lang.current()), build)


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
    base = (str(rd.store.path), run, name)
    content = rd.run_key(run)
    keys = {(*base, (int(r), *extra), content): int(r) for r in ranks}

    def load_keys(missing: list[Any]) -> dict[Any, Any]:
        got = load([keys[k] for k in missing])
        return {k: got.get(keys[k]) for k in missing}

    return {keys[k]: v for k, v in RESULTS.get_many(keys, load_keys).items()}


def run_cached(fn: Callable[..., Any]) -> Any:
    """Cache a ``fn(rd, run, *args)`` result per content of the run (see the module doc); callers
    get their own copy of DataFrames; ``fn.uncached`` is the function itself."""

    @functools.wraps(fn)
    def wrapper(rd: Reader, run: str, *args: Any, **kw: Any) -> Any:
        key = (freeze(args), freeze(kw))
        return copied(cached(rd, run, fn.__name__, key, lambda: fn(rd, run, *args, **kw)))

    wrapper.uncached = fn  # type: ignore[attr-defined]
    return wrapper
