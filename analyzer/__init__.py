"""rankscope analyzer: one store (DuckDB catalog + Parquet facts) for every rank, run and format.

Importing the package is cheap (the command line starts with it): the store, and with it DuckDB and
pyarrow, is imported when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import AnalyzerError, InputError, NothingIngestedError, QueryError, StoreError

if TYPE_CHECKING:
    from .store import Store, resolve_store_path

__all__ = [
    "AnalyzerError",
    "InputError",
    "NothingIngestedError",
    "QueryError",
    "Store",
    "StoreError",
    "resolve_store_path",
]


def __getattr__(name: str) -> Any:
    if name in ("Store", "resolve_store_path"):
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
