"""A small per-process cache of intermediate results, keyed on the run's Parquet files.

Every analysis starts from the same matched collectives and activity intervals; the report and the
web app ask for several analyses of one run in a row. An ingest that changes the run writes new
Parquet files (new names), so the key changes and stale entries are never served.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..store import Store

_MAX = 16
_lock = threading.Lock()
_entries: OrderedDict[tuple, Any] = OrderedDict()


def _signature(store: Store, run: str) -> tuple:
    ff = store.load_catalog(["fact_files"])["fact_files"]
    paths = [p for r, p in zip(ff.column("run").to_pylist(), ff.column("path").to_pylist()) if r == run]
    return tuple(sorted(paths))


def cached(store: Store, run: str, name: str, args: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per (store, run content, name, args)."""
    key = (str(store.path), run, _signature(store, run), name, args)
    with _lock:
        if key in _entries:
            _entries.move_to_end(key)
            return _entries[key]
    value = compute()
    with _lock:
        _entries[key] = value
        while len(_entries) > _MAX:
            _entries.popitem(last=False)
    return value
