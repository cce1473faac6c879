"""Users' SQL over the store, locked down: the one owner of the connection that `analyze query`, the
web app and an MCP server run a user's query on (as datasette's ``Database.execute``).

What holds a query in is DuckDB's own lock-down, set up on a fresh in-memory database per query:

- the statement: exactly one, of a type DuckDB's parser calls SELECT or EXPLAIN;
- the data: copies of the catalog tables, the extra tables the caller passes (the ``analysis.*``
  tables, computed before anything is locked) and a view per fact table over its Parquet files,
  read through Arrow datasets: pyarrow opens the store's files, DuckDB never opens any file;
- ``enable_external_access=false`` once the views exist: no file, directory or network access from SQL
  (``read_text``, ``read_csv``, ``glob``, ``COPY ... TO``, ``EXPORT``, ``ATTACH``, ``INSTALL``,
  ``LOAD``, persistent secrets), and no extension installed or loaded on demand
  (``autoinstall_known_extensions`` / ``autoload_known_extensions`` off);
- ``lock_configuration=true`` once set up: ``SET``, ``RESET`` and ``PRAGMA`` of a setting fail, under
  ``EXPLAIN ANALYZE`` too;
- a read-only transaction around the statement: no CREATE, INSERT, UPDATE or DELETE, even of the
  in-memory copies;
- limits: ``max_execution_time`` (DuckDB interrupts the query), ``memory_limit``, ``threads``, and at
  most ``rows`` rows fetched (the result says it was cut).

Why Arrow and not ``read_parquet`` views: DuckDB binds a view again at every query, so a view over
``read_parquet`` fails once external access is off; allowing the store's files by ``allowed_paths``
would allow writing them too (``COPY ... TO '<a fact file>' (USE_TMP_FILE false)`` overwrote one in
our tests, under a read-only transaction and on a read-only database alike).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from .. import schema
from ..errors import QueryError, QueryLimitError
from .sql import absent_columns, check_read_only, exact_frame, fact_paths, run_file_ranks_sql
from .store import Store, filter_fact_files

if TYPE_CHECKING:  # pandas costs 0.4 s to import: only the query paths load it
    import pandas as pd


@dataclass(frozen=True)
class Limits:
    """What one query may use. ``seconds``/``rows`` None: no limit."""

    seconds: float | None = 30.0
    rows: int | None = None
    memory: str = "2GB"
    threads: int = 2


DEFAULT_LIMITS = Limits()
# a server many people reach (the web app, an MCP server): datasette's habits, a little wider
SHARED_LIMITS = Limits(seconds=5.0, rows=10_000, memory="1GB", threads=1)


@dataclass
class QueryResult:
    """A query's rows (at most ``limits.rows``), whether more were there, and how long it took."""

    frame: pd.DataFrame
    truncated: bool
    seconds: float
    limits: Limits


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fact_view_sql(table: str, source: str | None, absent: set[str] = frozenset()) -> str:
    """The view of a fact table over its dataset; the columns ``absent`` from its files computed by
    their ``derive`` SQL (``sql.absent_columns``)."""
    if source is None:
        return schema.empty_select_sql(table)
    cols = ", ".join(
        f"CAST({(c.derive or 'NULL') if c.name in absent else _quote(c.name)} AS {c.type}) AS {_quote(c.name)}"
        for c in schema.FACTS[table].columns
    )
    return f"SELECT {cols} FROM {_quote(source)}"


def connect(
    store: Store,
    run: str | None = None,
    ranks: Sequence[int] | None = None,
    tables: Mapping[str, pa.Table] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> duckdb.DuckDBPyConnection:
    """A locked-down in-memory connection over the store (see the module doc), inside its read-only
    transaction. ``tables``: more tables, ``{"schema.name" or "name": Arrow table}``."""
    import pyarrow.dataset as ds

    config: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_persistent_secrets": False,
        "memory_limit": limits.memory,
        "threads": limits.threads,
    }
    if limits.seconds is not None:
        config["max_execution_time"] = max(1, int(limits.seconds * 1000))
    catalog = store.catalog_snapshot()
    con = duckdb.connect(":memory:", config=config)
    try:
        for name, tbl in catalog.items():
            _copy_in(con, name, tbl)
        ff = filter_fact_files(catalog["fact_files"], run=run, ranks=ranks)
        paths = fact_paths(str(store.path), ff)
        for t in schema.FACT_TABLES:
            source = None
            if paths.get(t.name):
                source = f"__facts_{t.name}"
                con.register(source, ds.dataset(paths[t.name], format="parquet", schema=schema.arrow_schema(t.name)))
            absent = absent_columns(t.name, paths[t.name]) if source else set()
            view = _fact_view_sql(t.name, source, absent)
            cond = run_file_ranks_sql(paths.get(t.name, []), ranks)
            con.execute(f"CREATE VIEW {_quote(t.name)} AS {view}" + (f" WHERE {cond}" if cond else ""))
        for qualified, tbl in (tables or {}).items():
            _copy_in(con, qualified, tbl)
        # set here, not in the config of connect(): DuckDB 2.0 then lists the in-memory database's
        # own path ("<cwd>/:memory:" and its .wal) in allowed_paths, which a COPY ... TO could write
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        con.execute("BEGIN TRANSACTION READ ONLY")
    except BaseException:
        con.close()
        raise
    return con


def _copy_in(con: duckdb.DuckDBPyConnection, qualified: str, tbl: pa.Table) -> None:
    schema_name, _, name = qualified.rpartition(".")
    if schema_name:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(schema_name)}")
    con.register("__in", tbl)
    try:
        target = f"{_quote(schema_name)}.{_quote(name)}" if schema_name else _quote(name)
        con.execute(f"CREATE TABLE {target} AS SELECT * FROM __in")
    finally:
        con.unregister("__in")


def execute(
    store: Store,
    sql: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    run: str | None = None,
    ranks: Sequence[int] | None = None,
    tables: Mapping[str, pa.Table] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> QueryResult:
    """Run one read-only statement of a user over the store (of ``run`` / ``ranks`` only, when given)
    under the lock-down and ``limits``; DuckDB's errors come back as :class:`QueryError`
    (:class:`QueryLimitError` for a limit)."""
    check_read_only(sql)
    t0 = time.perf_counter()
    store.require()
    con = connect(store, run=run, ranks=ranks, tables=tables, limits=limits)
    try:
        p: Any = None if not params else (dict(params) if isinstance(params, Mapping) else list(params))
        rel = con.sql(sql, params=p)
        truncated = False
        if rel is not None and limits.rows is not None:
            rel = rel.limit(limits.rows + 1)
        frame = exact_frame(rel)
        if limits.rows is not None and len(frame) > limits.rows:
            frame = frame.iloc[: limits.rows]
            truncated = True
        return QueryResult(frame, truncated, time.perf_counter() - t0, limits)
    except duckdb.Error as exc:
        raise _translate(exc, limits) from exc
    finally:
        con.close()


def _translate(exc: duckdb.Error, limits: Limits) -> QueryError:
    text = str(exc).strip()
    if isinstance(exc, duckdb.InterruptException) and limits.seconds is not None:
        return QueryLimitError(f"the query ran longer than its time limit of {limits.seconds:g} s and was stopped")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryLimitError(
            f"the query needed more than its memory limit of {limits.memory}: {text.splitlines()[0]}"
        )
    if isinstance(exc, duckdb.PermissionException):
        return QueryError(f"not allowed: queries read the store's tables only ({text.splitlines()[0]})")
    return QueryError(text)
