"""The store: one folder holding a DuckDB catalog and Parquet fact files.

Layout::

    <store>/catalog.duckdb                       runs, collections, source_files, fact_files (+ views)
    <store>/facts/<table>/run=<slug>/rank=<r>/<collection>-<uuid>.parquet
    <store>/.ingest.lock                         one ingest at a time

Atomicity: fact files are written under fresh names and only become part of the store when the
catalog transaction that lists them in ``fact_files`` commits. A crash before that leaves only
unreferenced files, removed by the next ingest; the store reads exactly as before.

Readers never hold the catalog open: ``read_connection`` copies the (small) catalog tables into an
in-memory DuckDB, detaches the file at once and builds views over the listed Parquet files, so an
``analyze ingest`` can commit while the web app serves.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .errors import QueryError, StoreError

if TYPE_CHECKING:  # pandas costs 0.4 s to import: only the query paths load it
    import pandas as pd

DEFAULT_STORE_DIRNAME = "rankscope_store"
STORE_ENV_VAR = "RANKSCOPE_STORE"
CATALOG_FILE = "catalog.duckdb"
FACTS_DIR = "facts"
LOCK_FILE = ".ingest.lock"
_LOCK_RETRY_SECONDS = 30.0


def resolve_store_path(path: str | os.PathLike[str] | None = None) -> Path:
    """--store PATH, else $RANKSCOPE_STORE, else ./rankscope_store."""
    if path:
        return Path(path).expanduser().resolve()
    env = os.environ.get(STORE_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return (Path.cwd() / DEFAULT_STORE_DIRNAME).resolve()


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def slug(text: str) -> str:
    """A file-system-safe rendering of a run name for partition folders."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return s or "run"


def _is_lock_error(exc: Exception) -> bool:
    msg = str(exc).lower()
    return "lock" in msg or "conflicting" in msg or "being used" in msg


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def fact_select_sql(table: str, paths: Sequence[str]) -> str:
    """SELECT over the given Parquet files with the table's columns in schema order."""
    if not paths:
        return schema.empty_select_sql(table)
    t = schema.FACTS[table]
    cols = ", ".join(f'CAST("{c.name}" AS {c.type}) AS "{c.name}"' for c in t.columns)
    # run / rank come from the files, not from the folder names (a run name is slugged there)
    return f"SELECT {cols} FROM read_parquet({_sql_list(paths)}, union_by_name=true, hive_partitioning=false)"


def _exact_frame(rel: duckdb.DuckDBPyRelation | None) -> pd.DataFrame:
    """A query result as a DataFrame without rounding: DuckDB's HUGEINT (what sum() of BIGINT
    ns returns) would become float64; such columns come as int64 when every value fits, else as
    exact Python ints."""
    import pandas as pd

    if rel is None:  # a statement without a result
        return pd.DataFrame()
    huge = {c for c, t in zip(rel.columns, rel.types) if str(t) in ("HUGEINT", "UHUGEINT")}
    if not huge:
        return rel.df()

    def q(c: str) -> str:
        return '"' + c.replace('"', '""') + '"'

    exprs = ", ".join(f"CAST({q(c)} AS VARCHAR) AS {q(c)}" if c in huge else q(c) for c in rel.columns)
    df = rel.project(exprs).df()
    for c in huge:
        values = [None if v is None else int(v) for v in df[c]]
        fits = all(v is not None and -(2**63) <= v < 2**63 for v in values)
        df[c] = pd.Series(values, dtype="int64" if fits else object, index=df.index)
    return df


def _filter_fact_files(
    ff: pa.Table,
    run: str | None = None,
    ranks: Sequence[int] | None = None,
    table: str | None = None,
) -> pa.Table:
    """The rows of the catalog's fact_files of one run / some ranks / one table."""
    if table is not None:
        ff = ff.filter(pc.equal(ff["table_name"], table))
    if run is not None:
        ff = ff.filter(pc.equal(ff["run"], run))
    if ranks is not None:
        ff = ff.filter(pc.is_in(ff["rank"], value_set=pa.array(list(ranks), ff.schema.field("rank").type)))
    return ff


_SNAPSHOTS: dict[str, tuple[tuple[Any, ...], dict[str, pa.Table]]] = {}  # Store.catalog_snapshot, per folder


def run_key(catalog: Mapping[str, pa.Table], run: str) -> str:
    """What identifies the content of ``run`` for a cache of results computed from it: a digest of
    its fact files (fresh names on every ingest) and its collections (id and ingest time), from the
    catalog tables ``fact_files`` and ``collections`` (``Store.load_catalog``)."""
    ff, co = catalog["fact_files"], catalog["collections"]
    ff = ff.filter(pc.equal(ff["run"], run))
    co = co.filter(pc.equal(co["run"], run))
    files = [str(p) for p in ff["path"].to_pylist()]
    colls = [f"{c}:{t}" for c, t in zip(co["collection_id"].to_pylist(), co["ingested_at"].to_pylist())]
    return hashlib.sha256("\n".join(sorted(files + colls)).encode()).hexdigest()


class Store:
    """A rankscope store folder."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path).resolve()
        self.catalog_path = self.path / CATALOG_FILE
        self.facts_dir = self.path / FACTS_DIR
        self.lock_path = self.path / LOCK_FILE

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- lifecycle ------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.catalog_path.exists()

    def initialize(self) -> None:
        """Create the folder and catalog tables if missing; check the schema version."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.facts_dir.mkdir(exist_ok=True)
        with self.write_connection() as con:
            version = None
            has_info = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_info'"
            ).fetchone()[0]
            if has_info:
                row = con.execute("SELECT value FROM store_info WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else None
            if version is not None and version != schema.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written with schema version {version}, this rankscope uses "
                    f"{schema.SCHEMA_VERSION}: ingest into a new store (--store) or delete it"
                )
            con.execute("BEGIN")
            for t in schema.CATALOG_TABLES:
                for stmt in schema.create_table_sql(t.name):
                    con.execute(stmt)
            if version is None:
                con.execute(
                    "INSERT INTO store_info VALUES ('schema_version', ?), ('created_at', ?)",
                    [str(schema.SCHEMA_VERSION), utcnow().isoformat()],
                )
                self._create_fact_views(con, {})
            con.execute("COMMIT")

    def require(self) -> None:
        if not self.exists():
            raise StoreError(
                f"no store at {self.path}: run `analyze ingest <profile folder>` first "
                f"(or point --store / ${STORE_ENV_VAR} at an existing store)"
            )

    # -- connections ----------------------------------------------------------------------------

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + _LOCK_RETRY_SECONDS
        delay = 0.02
        while True:
            try:
                return duckdb.connect(str(self.catalog_path), read_only=read_only)
            except duckdb.Error as exc:
                if not _is_lock_error(exc) or time.monotonic() > deadline:
                    raise StoreError(f"cannot open {self.catalog_path}: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @contextlib.contextmanager
    def write_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived read-write connection to the catalog (retries while a reader holds it)."""
        con = self._connect(read_only=False)
        try:
            yield con
        finally:
            con.close()

    def load_catalog(self, tables: Iterable[str] | None = None) -> dict[str, pa.Table]:
        """Copy catalog tables into memory (opening the file read-only for as short as possible)."""
        self.require()
        names = list(tables) if tables is not None else [t.name for t in schema.CATALOG_TABLES]
        con = self._connect(read_only=True)
        try:
            return {n: con.sql(f'SELECT * FROM "{n}"').to_arrow_table() for n in names}
        finally:
            con.close()

    def catalog_snapshot(self) -> dict[str, pa.Table]:
        """Every catalog table, as ``load_catalog()`` returns them, read again only when the catalog
        changed since the last snapshot of this store folder (kept per process; treat it as read-only).

        Every commit writes the catalog file or its write-ahead log, so their (inode, size, mtime)
        tell whether a snapshot is still the catalog; a snapshot read while a commit wrote is not kept.
        """
        key = str(self.path)
        stamp = self._catalog_stamp()
        hit = _SNAPSHOTS.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        tables = self.load_catalog()
        if self._catalog_stamp() == stamp:
            _SNAPSHOTS[key] = (stamp, tables)
        return tables

    def _catalog_stamp(self) -> tuple[Any, ...]:
        out: list[Any] = []
        for f in (self.catalog_path, self.catalog_path.with_name(self.catalog_path.name + ".wal")):
            try:
                st = f.stat()
                out.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    @contextlib.contextmanager
    def read_connection(
        self, run: str | None = None, ranks: Sequence[int] | None = None, tables: Sequence[str] | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB with every table as a view; the catalog file is not kept open.

        ``run`` / ``ranks`` restrict the fact views to those files (cheap for one rank of a big run).
        ``tables`` creates only those fact views (binding a view reads the footer of each of its
        Parquet files: a web request that needs two tables of a 64-rank run opens much faster).
        """
        cat = self.load_catalog()
        con = duckdb.connect(":memory:")
        try:
            for name, tbl in cat.items():
                con.register(f"__cat_{name}", tbl)
                con.execute(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "__cat_{name}"')
                con.unregister(f"__cat_{name}")
            ff = _filter_fact_files(cat["fact_files"], run=run, ranks=ranks)
            self._create_fact_views(con, self._paths_by_table(ff), temp=True, only=tables)
            yield con
        finally:
            con.close()

    def _paths_by_table(self, fact_files: pa.Table) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for table, path in zip(fact_files["table_name"].to_pylist(), fact_files["path"].to_pylist()):
            out.setdefault(table, []).append(str(self.path / path))
        return out

    def _create_fact_views(
        self,
        con: duckdb.DuckDBPyConnection,
        paths: dict[str, list[str]],
        temp: bool = False,
        only: Sequence[str] | None = None,
    ) -> None:
        kw = "TEMP " if temp else ""
        for t in schema.FACT_TABLES:
            if only is not None and t.name not in only:
                continue
            con.execute(f'CREATE OR REPLACE {kw}VIEW "{t.name}" AS {fact_select_sql(t.name, paths.get(t.name, []))}')
            if not temp:
                con.execute(f"COMMENT ON VIEW \"{t.name}\" IS '{t.doc.replace(chr(39), chr(39) * 2)}'")

    def fact_files(self, table: str, run: str | None = None, ranks: Sequence[int] | None = None) -> list[str]:
        """Absolute paths of the Parquet files of a table, optionally for one run / some ranks."""
        ff = _filter_fact_files(self.load_catalog(["fact_files"])["fact_files"], run=run, ranks=ranks, table=table)
        return [str(self.path / p) for p in ff["path"].to_pylist()]

    # -- queries --------------------------------------------------------------------------------

    def query(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        run: str | None = None,
        tables: Mapping[str, pa.Table] | None = None,
    ) -> pd.DataFrame:
        """Run one read-only SELECT over every table and return a DataFrame.

        ``tables``: more tables for this query, ``{"schema.name" or "name": Arrow table}`` (the analyses).
        """
        check_read_only(sql)
        with self.read_connection(run=run) as con:
            for qualified, table in (tables or {}).items():
                schema_name, _, name = qualified.rpartition(".")
                if schema_name:
                    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema_name}"')
                con.register("__extra", table)
                target = f'"{schema_name}"."{name}"' if schema_name else f'"{name}"'
                con.execute(f"CREATE TABLE {target} AS SELECT * FROM __extra")
                con.unregister("__extra")
            try:
                return _exact_frame(con.sql(sql, params=list(params) if params else None))
            except duckdb.Error as exc:
                raise QueryError(str(exc).strip()) from exc

    # -- writing --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def ingest_lock(self, wait_seconds: float = 600.0) -> Iterator[None]:
        """Serialise ingests into one store (a second `analyze ingest` waits for the first)."""
        self.path.mkdir(parents=True, exist_ok=True)
        fh = open(self.lock_path, "a+")
        try:
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StoreError(f"another ingest holds {self.lock_path}") from None
                    time.sleep(0.2)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    def fact_dir(self, table: str, run: str, rank: int) -> Path:
        return self.facts_dir / table / f"run={slug(run)}" / f"rank={rank}"

    def commit(
        self,
        run: str,
        root_path: str,
        replace_collections: Sequence[str],
        collections: Sequence[dict[str, Any]],
        fact_files: Sequence[dict[str, Any]],
        source_files: Sequence[dict[str, Any]],
    ) -> None:
        """Apply one ingest to the catalog in a single transaction.

        ``replace_collections``: ids whose old collection / fact_files / source_files rows are dropped first.
        ``source_files``: rows replacing any existing rows with the same (run, path).
        """
        now = utcnow()
        with self.write_connection() as con:
            con.execute("BEGIN")
            try:
                exists = con.execute("SELECT count(*) FROM runs WHERE run = ?", [run]).fetchone()[0]
                if exists:
                    con.execute("UPDATE runs SET updated_at = ?, root_path = ? WHERE run = ?", [now, root_path, run])
                else:
                    con.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", [run, root_path, now, now])
                if replace_collections:
                    ids = list(replace_collections)
                    con.execute("DELETE FROM collections WHERE run = ? AND list_contains(?, collection_id)", [run, ids])
                    con.execute("DELETE FROM fact_files WHERE run = ? AND list_contains(?, collection_id)", [run, ids])
                    con.execute(
                        "DELETE FROM source_files WHERE run = ? AND list_contains(?, collection_id)", [run, ids]
                    )
                if source_files:
                    paths = [r["path"] for r in source_files]
                    con.execute("DELETE FROM source_files WHERE run = ? AND list_contains(?, path)", [run, paths])
                self._insert(con, "collections", collections)
                self._insert(con, "fact_files", fact_files)
                self._insert(con, "source_files", source_files)
                ff = con.sql("SELECT table_name, path FROM fact_files").to_arrow_table()
                self._create_fact_views(con, self._paths_by_table(ff))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def drop_run(self, run: str) -> bool:
        """Remove a run from the catalog (its files are garbage-collected by the next ingest)."""
        self.require()
        with self.write_connection() as con:
            if not con.execute("SELECT count(*) FROM runs WHERE run = ?", [run]).fetchone()[0]:
                return False
            con.execute("BEGIN")
            for t in ("runs", "collections", "source_files", "fact_files"):
                con.execute(f'DELETE FROM "{t}" WHERE run = ?', [run])
            ff = con.sql("SELECT table_name, path FROM fact_files").to_arrow_table()
            self._create_fact_views(con, self._paths_by_table(ff))
            con.execute("COMMIT")
        return True

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        sch = schema.arrow_schema(table)
        data = pa.Table.from_pylist([{c: r.get(c) for c in sch.names} for r in rows], schema=sch)
        con.register("__rows", data)
        try:
            cols = ", ".join(f'CAST("{c.name}" AS {c.type})' for c in schema.TABLES[table].columns)
            con.execute(f'INSERT INTO "{table}" SELECT {cols} FROM __rows')
        finally:
            con.unregister("__rows")

    def garbage_collect(self, min_age_seconds: float = 0.0) -> int:
        """Delete Parquet files no catalog row refers to (left by a killed ingest or a replaced
        collection). Call only under ``ingest_lock``. Returns the number of files removed."""
        if not self.exists() or not self.facts_dir.exists():
            return 0
        live = set(self.load_catalog(["fact_files"])["fact_files"].column("path").to_pylist())
        removed = 0
        now = time.time()
        for f in self.facts_dir.rglob("*.parquet*"):
            rel = str(f.relative_to(self.path))
            if rel in live:
                continue
            try:
                if now - f.stat().st_mtime >= min_age_seconds:
                    f.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        for d in sorted((p for p in self.facts_dir.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()
        return removed


def check_read_only(sql: str) -> None:
    """Reject anything but SELECT-like statements (the query command is read-only)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from exc
    if not statements:
        raise QueryError("empty query")
    allowed = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
    for st in statements:
        if st.type not in allowed:
            raise QueryError(f"only read-only SELECT queries are allowed (got {st.type.name})")
