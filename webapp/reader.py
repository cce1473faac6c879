"""The request's view of the store: one :class:`Reader` per page request or callback.

A Reader reads the catalog from ``Store.catalog_snapshot()`` (read again only when an ingest
committed) and the facts through ``Store.read_connection(run, ranks, tables)``: an in-memory DuckDB
with a copy of the catalog and views over the run's Parquet files (the catalog file is closed at
once, so an ``analyze ingest`` can commit while the server serves). Name the run, ranks and fact
tables a request will read when creating the Reader and the store is opened once for them. Close
the reader at the end of the request (``with reader(...) as rd``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from analyzer.store import Store, fact_select_sql, run_key
from analyzer.store.sql import fact_paths
from analyzer.store.store import filter_fact_files

from .errors import EmptyStore

RankKey = tuple[int, ...] | None  # sorted ranks, None = every rank


class Reader:
    """One request's view of the store (see the module doc)."""

    def __init__(
        self, store: Store, run: str | None = None, ranks: Sequence[int] | None = None, tables: Sequence[str] = ()
    ):
        self.store = store
        self._hint = (run, rank_key(ranks), frozenset(tables))
        self._stack = contextlib.ExitStack()
        self._conns: dict[tuple[str, RankKey, frozenset[str]], duckdb.DuckDBPyConnection] = {}
        self._catalog: duckdb.DuckDBPyConnection | None = None
        self._tables: dict[str, pa.Table] | None = None
        self._stamp: tuple[Any, ...] | None = None
        self._run_keys: dict[str, str] = {}
        self.opened = 0  # read_connection calls (tests and the benchmark look at it)
        self.tables_read: set[str] = set()  # the fact tables asked for (tests look at it)

    def close(self) -> None:
        self._stack.close()
        self._conns.clear()
        self._catalog = None

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _require(self) -> None:
        if not self.store.exists():
            raise EmptyStore(f"no store at {self.store.path}")

    def catalog_tables(self) -> dict[str, pa.Table]:
        """The catalog tables (Arrow) as this request sees them."""
        if self._tables is None:
            self._require()
            self._stamp, self._tables = self.store.stamped_catalog()
        return self._tables

    def catalog_stamp(self) -> tuple[Any, ...] | None:
        """The state of the catalog this request reads (``Store.stamped_catalog``; None: read while
        a commit wrote, nothing derived from it may be kept)."""
        self.catalog_tables()
        return self._stamp

    def catalog(self) -> duckdb.DuckDBPyConnection:
        """A connection where the catalog tables (runs, collections, source_files, fact_files) can be read."""
        if self._conns:
            return next(iter(self._conns.values()))
        if self._catalog is None:
            # catalog only: fact views are bound when a query needs them (a cached result does not);
            # a cursor of the process's in-memory copy of this catalog (made once per catalog state,
            # ``Store.read_connection``), not a new database per request
            self._require()
            self._catalog = self._stack.enter_context(self.store.read_connection(tables=()))
        return self._catalog

    def run_key(self, run: str) -> str:
        """The content of ``run`` (``analyzer.store.run_key``): the key of results cached between requests."""
        if run not in self._run_keys:
            self._run_keys[run] = run_key(self.catalog_tables(), run)
        return self._run_keys[run]

    def facts(
        self, run: str, ranks: Sequence[int] | None, tables: Sequence[str] | frozenset[str]
    ) -> duckdb.DuckDBPyConnection:
        """A connection with views of ``tables`` for ``run`` (at least ``ranks``; None = every rank)."""
        rk, need = rank_key(ranks), frozenset(tables)
        self.tables_read |= need
        for (r, have_rk, have_tb), con in self._conns.items():
            if r == run and _covers(have_rk, rk) and need <= have_tb:
                return con
        self._require()
        h_run, h_rk, h_tb = self._hint
        if h_run == run and _covers(h_rk, rk):
            rk, need = h_rk, need | h_tb
        con = self._stack.enter_context(
            self.store.read_connection(run=run, ranks=None if rk is None else list(rk), tables=sorted(need))
        )
        self.opened += 1
        self._conns[(run, rk, need)] = con
        return con

    def has_files(self, run: str, ranks: Sequence[int] | None, table: str) -> bool:
        """Whether ``table`` has any file of ``run`` / ``ranks`` (None = every rank) in the catalog: a
        query over none is skipped (it still costs a query's planning)."""
        ff = self.catalog_tables()["fact_files"]
        return filter_fact_files(ff, run, None if ranks is None else [int(r) for r in ranks], table).num_rows > 0

    def source(self, run: str, ranks: Sequence[int] | None, table: str) -> str:
        """A subquery of ``table``'s rows of ``run`` / ``ranks`` (None = every rank) straight over their
        Parquet files, as the fact views of ``Store.read_connection`` read them, for a query on
        ``catalog()``: nothing is bound before the query that uses it (a set of views made for a set
        of ranks costs binding every view once more than the query's own: ~10 ms for 8 ranks and 4
        tables, for every new set of ranks the timeline is asked for)."""
        self._require()
        self.tables_read.add(table)
        rk = None if ranks is None else sorted({int(r) for r in ranks})
        ff = filter_fact_files(self.catalog_tables()["fact_files"], run, rk, table)
        paths = fact_paths(str(self.store.path), ff).get(table, [])  # as the fact views read them
        return f"({fact_select_sql(table, paths, usable_only=True, ranks=rk)})"


def rank_key(ranks: Sequence[int] | None) -> RankKey:
    return None if ranks is None else tuple(sorted({int(r) for r in ranks}))


def _covers(have: RankKey, want: RankKey) -> bool:
    return have is None or (want is not None and set(want) <= set(have))


def reader(
    store: Store | Reader, run: str | None = None, ranks: Sequence[int] | None = None, tables: Sequence[str] = ()
) -> contextlib.AbstractContextManager[Reader]:
    """``with reader(store, run, ranks, tables) as rd``: a Reader for one request (name what it
    will read so the store is opened once). Given a Reader, uses it and leaves it open."""
    if isinstance(store, Reader):
        return contextlib.nullcontext(store)
    return Reader(store, run, ranks, tables)
