"""Results of the analyses, kept per process and per content of the run.

Every analysis of a run starts from the same matched collectives and activity intervals, and the
report, the ``analysis.*`` tables and the web app ask for several analyses of one run in a row.
:func:`per_run` makes a function ``fn(store, run, *args)`` an analysis of one run: ``run`` None
means the most recently ingested run (``analyzer.store.resolve_run``), and its result is kept under
the run's content (``analyzer.store.run_key``: a re-ingest writes new Parquet files, so new keys)
and its arguments. Callers get their own copy of a DataFrame; other results (the activity
intervals, the clock alignment) are shared: treat them as read-only. :func:`per_pair` does the same
for a comparison of two runs ``fn(store, base, new, ...)``, kept under the content of both.

The analyses of ``STORED`` are computed once more at ingest and stored with the run (``stored``,
the catalog's ``run_results``): ``per_run`` serves those when the run is still the content they
were computed from and this version of their code computed them (``analyzer.versions``: the
analysis' module and the analyzer modules it imports), so a server's first view does not match
every collective again.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from ..store import ResultCache, Store, copied, freeze, resolve_run, run_key

RESULTS = ResultCache(size=64, budget=256 << 20)  # whole-run results grow with the ranks: bounded in bytes too
# the analyses an ingest computes and stores with the run (``stored``; their full names, filled by
# ``analyzer.analyses.STORED_AT_INGEST``): ``per_run`` reads them from the store before computing
STORED: set[str] = set()

F = TypeVar("F", bound=Callable[..., Any])


def per_run(fn: F) -> F:
    """``fn(store, run, ...)`` with ``run`` resolved and its result cached (see the module doc)."""
    sig = inspect.signature(fn)
    name = f"{fn.__module__}.{fn.__qualname__}"
    defaults = tuple(freeze(p.default) for p in list(sig.parameters.values())[2:])

    @functools.wraps(fn)
    def wrapper(store: Store, run: str | None = None, *args: Any, **kw: Any) -> Any:
        catalog = store.catalog_snapshot()
        run = resolve_run(catalog, run)
        bound = sig.bind(store, run, *args, **kw)
        bound.apply_defaults()
        rest = tuple(freeze(v) for v in list(bound.arguments.values())[2:])
        content = run_key(catalog, run)
        key = (str(store.path), run, content, name, rest)

        def compute() -> Any:
            # computed at ingest (with its default arguments), if the run is still what it was computed from;
            # a store holding none (runs of few ranks) does not import their reading (msgspec, Parquet)
            stored = catalog.get("run_results")
            if name in STORED and rest == defaults and stored is not None and stored.num_rows:
                from .stored import read_stored

                found = read_stored(store, catalog, run, content, wrapper)
                if found is not None:
                    return found
            return fn(*bound.args, **bound.kwargs)

        return copied(RESULTS.get(key, compute))

    wrapper.compute = fn  # type: ignore[attr-defined]  # the computation itself, without cache or stored result
    wrapper.full_name = name  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def per_pair(fn: F) -> F:
    """``fn(store, base, new, ...)``: both runs resolved (named, checked) and the result cached under
    the content of both runs and the other arguments."""
    sig = inspect.signature(fn)
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(store: Store, base: str, new: str, *args: Any, **kw: Any) -> Any:
        catalog = store.catalog_snapshot()
        base, new = resolve_run(catalog, base), resolve_run(catalog, new)
        bound = sig.bind(store, base, new, *args, **kw)
        bound.apply_defaults()
        rest = tuple(freeze(v) for v in list(bound.arguments.values())[3:])
        key = (str(store.path), base, run_key(catalog, base), new, run_key(catalog, new), name, rest)
        return copied(RESULTS.get(key, lambda: fn(*bound.args, **bound.kwargs)))

    return wrapper  # type: ignore[return-value]
