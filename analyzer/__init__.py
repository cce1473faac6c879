"""rankscope analyzer: one store (DuckDB catalog + Parquet facts) for every rank, run and format."""

from .errors import AnalyzerError, InputError, NothingIngestedError, QueryError, StoreError
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
