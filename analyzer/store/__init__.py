"""The store: one folder holding a DuckDB catalog and Parquet fact files.

Layout::

    <store>/catalog.duckdb                       runs, collections, source_files, fact_files (+ views)
    <store>/facts/<table>/run=<slug>/rank=<r>/<collection>-<uuid>.parquet
    <store>/facts/<agg table>/run=<slug>/run-<uuid>.parquet   an aggregate of every collection of a run
    <store>/.ingest.lock                         one ingest at a time
    <store>/.scratch/                            the readers' temporary files during an ingest

Modules: ``layout`` (the folder and the names in it), ``store`` (:class:`Store`: connections,
atomic commits, the ingest lock, garbage collection), ``sql`` (fact SELECTs, the read-only check,
exact results), ``runs`` (the run listing, ``resolve_run``, the run content key ``run_key``),
``results`` (:class:`ResultCache`: results kept per content of a run, for the analyses and the web app),
``query`` (``execute``: a user's SQL under DuckDB's lock-down and limits, the one owner of that
connection for `analyze query`, the web app and an MCP server),
``tags`` (baselines and tags: names users give runs, in the catalog table ``run_tags``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .layout import (
    CATALOG_FILE,
    DEFAULT_STORE_DIRNAME,
    FACTS_DIR,
    LOCK_FILE,
    SCRATCH_DIR,
    STORE_ENV_VAR,
    resolve_store_path,
    scratch_folder,
    slug,
)

if TYPE_CHECKING:
    from .query import DEFAULT_LIMITS, SHARED_LIMITS, Limits, QueryResult, execute
    from .results import ResultCache, copied, freeze, nbytes
    from .runs import PROBLEMS_SQL, RUNS_SQL, Catalog, resolve_run, run_key, run_names
    from .sql import check_read_only, fact_select_sql
    from .store import Store, utcnow
    from .tags import (
        BASELINE,
        TAG,
        RunTag,
        add_tag,
        baseline_run,
        remove_baseline,
        remove_tag,
        resolve_ref,
        run_tags,
        tag_baseline,
        tags_by_run,
    )

# the rest is imported when first named: `analyze --help` and the ingest's workers need no DuckDB
_LAZY = {
    "DEFAULT_LIMITS": "query",
    "SHARED_LIMITS": "query",
    "Limits": "query",
    "QueryResult": "query",
    "execute": "query",
    "ResultCache": "results",
    "copied": "results",
    "freeze": "results",
    "nbytes": "results",
    "RUNS_SQL": "runs",
    "PROBLEMS_SQL": "runs",
    "Catalog": "runs",
    "resolve_run": "runs",
    "run_key": "runs",
    "run_names": "runs",
    "check_read_only": "sql",
    "fact_select_sql": "sql",
    "Store": "store",
    "utcnow": "store",
    "BASELINE": "tags",
    "TAG": "tags",
    "RunTag": "tags",
    "add_tag": "tags",
    "baseline_run": "tags",
    "remove_baseline": "tags",
    "remove_tag": "tags",
    "resolve_ref": "tags",
    "run_tags": "tags",
    "tag_baseline": "tags",
    "tags_by_run": "tags",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "BASELINE",
    "TAG",
    "RunTag",
    "add_tag",
    "baseline_run",
    "remove_baseline",
    "remove_tag",
    "resolve_ref",
    "run_tags",
    "tag_baseline",
    "tags_by_run",
    "CATALOG_FILE",
    "DEFAULT_LIMITS",
    "DEFAULT_STORE_DIRNAME",
    "FACTS_DIR",
    "LOCK_FILE",
    "SCRATCH_DIR",
    "PROBLEMS_SQL",
    "SHARED_LIMITS",
    "RUNS_SQL",
    "STORE_ENV_VAR",
    "Catalog",
    "Limits",
    "QueryResult",
    "ResultCache",
    "Store",
    "check_read_only",
    "copied",
    "execute",
    "fact_select_sql",
    "freeze",
    "nbytes",
    "resolve_run",
    "resolve_store_path",
    "run_key",
    "run_names",
    "scratch_folder",
    "slug",
    "utcnow",
]
