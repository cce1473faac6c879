"""The Store: one folder of a DuckDB catalog and Parquet facts (the package doc has the layout).

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
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import schema
from ..errors import StoreError
from . import digest
from .layout import CATALOG_FILE, FACTS_DIR, LOCK_FILE, SCRATCH_DIR, STORE_ENV_VAR
from .sql import fact_paths, fact_select_sql, usable_times_sql

if TYPE_CHECKING:  # pandas costs 0.4 s to import: only the query paths load it
    import duckdb
    import pandas as pd
    import pyarrow as pa

# DuckDB and pyarrow are imported by the methods that use them: a Store is made by every command,
# and the ingest forks its readers before it opens the catalog

_LOCK_RETRY_SECONDS = 30.0


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _is_lock_error(exc: Exception) -> bool:
    msg = str(exc).lower()
    return "lock" in msg or "conflicting" in msg or "being used" in msg


def filter_fact_files(
    ff: pa.Table,
    run: str | None = None,
    ranks: Sequence[int] | None = None,
    table: str | None = None,
) -> pa.Table:
    """The rows of the catalog's fact_files of one run / some ranks / one table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table is not None:
        ff = ff.filter(pc.equal(ff["table_name"], table))
    if run is not None:
        ff = ff.filter(pc.equal(ff["run"], run))
    if ranks is not None:
        ff = ff.filter(pc.is_in(ff["rank"], value_set=pa.array(list(ranks), ff.schema.field("rank").type)))
    return ff


# Store.catalog_snapshot, per store folder: (stamp of the catalog files, tables), the most recent last
_SNAPSHOTS: OrderedDict[str, tuple[tuple[Any, ...], dict[str, pa.Table]]] = OrderedDict()
_SNAPSHOT_FOLDERS = 16
_SNAPSHOT_LOCK = threading.Lock()  # a look-up (get, then move_to_end) raced another folder's eviction: KeyError
# Store.read_connection: one in-memory database per (store folder, catalog stamp) holding the catalog's
# copy, the most recent last; in it a schema of fact views per (run, ranks, tables, usable_only)
_READ_DBS: OrderedDict[tuple[Any, ...], _ReadDatabase] = OrderedDict()
_READ_DB_COUNT = 4
_VIEW_SETS = 64  # schemas of views kept per database (those in use are never dropped)
# and at most this many Parquet files bound by the idle ones of a database (~32 MiB): DuckDB keeps ~4 KB per file a
# view binds (a view set of a 4096-rank run's fact tables: ~100 MiB), so sets over many ranks' files are
# dropped first when idle, whatever the rank count (bench/README.md, "aggregates in one file per run")
_VIEW_FILES = 8192
_READ_LOCK = threading.Lock()


def _every_rank(fact_files: pa.Table, run: str, ranks: Sequence[int]) -> bool:
    """Whether ``ranks`` holds every rank with fact files in ``run`` (then the run's files are theirs)."""
    ff = filter_fact_files(fact_files, run=run)
    return set(ff["rank"].to_pylist()) <= {int(r) for r in ranks}


def _bound_set(db: _ReadDatabase, views: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The key of a view set of ``db`` that serves ``views`` = (run, ranks, tables, usable_only):
    the same, else one over the same files (run, ranks, usable_only) holding every table asked for
    (the most recently used); None: none bound yet. Call under ``_READ_LOCK``."""
    if views in db.schemas:
        return views
    run, ranks, tables, usable_only = views
    if tables is None:
        return None
    return next(
        (
            v
            for v in reversed(db.schemas)
            if (v[0], v[1], v[3]) == (run, ranks, usable_only) and (v[2] is None or set(tables) <= set(v[2]))
        ),
        None,
    )


def _idle_to_drop(db: _ReadDatabase) -> list[tuple[tuple[Any, ...], str]]:
    """The view sets of ``db`` to drop, least recently used first: idle ones while the database
    keeps more than ``_VIEW_SETS`` sets or its idle sets bind more than ``_VIEW_FILES`` files
    (those in use are never dropped). Call under ``_READ_LOCK``."""
    idle = [(v, s) for v, s in db.schemas.items() if not db.in_use.get(s)]
    count, files = len(db.schemas), sum(db.files.get(s, 0) for _, s in idle)
    drop = []
    for v, s in idle:
        if count <= _VIEW_SETS and files <= _VIEW_FILES:
            break
        drop.append((v, s))
        count -= 1
        files -= db.files.get(s, 0)
    return drop


class _ReadDatabase:
    """The in-memory database of one catalog state: the catalog tables copied once, and a schema of
    fact views per (run, ranks, tables, usable_only) bound once (binding reads every file's footer)
    and kept while used lately; a connection reads a schema through its ``search_path``."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.schemas: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self.in_use: dict[str, int] = {}
        self.files: dict[str, int] = {}  # the Parquet files each schema's views bound
        self.building: dict[tuple[Any, ...], threading.Event] = {}
        self.serial = 0


class Store:
    """A rankscope store folder."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path).resolve()
        self.catalog_path = self.path / CATALOG_FILE
        self.facts_dir = self.path / FACTS_DIR
        self.lock_path = self.path / LOCK_FILE
        self.scratch_dir = self.path / SCRATCH_DIR
        # ``catalog_held``: (thread, connection, digests to write when it closes) while held
        self._held: tuple[int, duckdb.DuckDBPyConnection, list[tuple[Any, ...]]] | None = None

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- lifecycle ------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.catalog_path.exists()

    def initialize(self, views: bool = True) -> None:
        """Create the folder and catalog tables if missing; check the schema version. A catalog that
        has them all already is only read (its files, and so the digest's stamp, stay as they are),
        unless it lacks fact views that ``views`` asks for. ``views=False``: a new catalog gets its
        fact views at its first commit (an ingest's: made once, with their files, not twice)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.facts_dir.mkdir(exist_ok=True)
        with self.write_connection() as con:
            version = None
            present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if "store_info" in present:
                row = con.execute("SELECT value FROM store_info WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else None
            if version is not None and version != schema.SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written with schema version {version}, this rankscope uses "
                    f"{schema.SCHEMA_VERSION}: ingest into a new store (--store) or delete it"
                )
            if version is not None and all(t.name in present for t in schema.CATALOG_TABLES):
                if views and any(t.name not in present for t in schema.FACT_TABLES):
                    self._refresh_fact_views(con, set())  # those missing: a new catalog never committed
                return
            con.execute("BEGIN")
            # one call for every statement: DuckDB runs them in order, without a round trip each
            con.execute(";\n".join(stmt for t in schema.CATALOG_TABLES for stmt in schema.create_table_sql(t.name)))
            if version is None:
                con.execute(
                    "INSERT INTO store_info VALUES ('schema_version', ?), ('created_at', ?)",
                    [str(schema.SCHEMA_VERSION), utcnow().isoformat()],
                )
                if views:
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
        import duckdb

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
    def catalog_held(self) -> Iterator[None]:
        """Hold one read-write connection to an existing catalog for every catalog call of this
        thread inside (``initialize``, ``load_catalog``, ``catalog_rows``, ``commit``,
        ``garbage_collect``, ``write_digest``): one open and close (a DuckDB file connection costs
        ~10-20 ms of CPU, the checkpoint at its close as much) instead of one each. Other processes
        cannot open the catalog meanwhile (they retry): hold it for catalog work only, under
        ``ingest_lock``. The digests written inside are written once it is closed (closing
        checkpoints: their stamp is that of the closed files), unless the block failed."""
        if self._held is not None or not self.exists():
            yield  # nested (the outer holder closes), or nothing to hold: each call opens its own
            return
        con = self._connect(read_only=False)
        pending: list[tuple[Any, ...]] = []
        self._held = (threading.get_ident(), con, pending)
        try:
            yield
        finally:
            self._held = None
            con.close()
        if pending:
            self._digest(*pending[-1], digest.catalog_stamp(self.path))

    def _held_by_me(self) -> tuple[duckdb.DuckDBPyConnection, list[tuple[Any, ...]]] | None:
        held = self._held
        return (held[1], held[2]) if held is not None and held[0] == threading.get_ident() else None

    @contextlib.contextmanager
    def _catalog(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """The held connection (``catalog_held``), else a connection of its own, closed after."""
        held = self._held_by_me()
        if held is not None:
            yield held[0]
            return
        con = self._connect(read_only=read_only)
        try:
            yield con
        finally:
            con.close()

    @contextlib.contextmanager
    def write_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived read-write connection to the catalog (retries while a reader holds it);
        the held one inside ``catalog_held``."""
        with self._catalog(read_only=False) as con:
            yield con

    def load_catalog(self, tables: Iterable[str] | None = None, run: str | None = None) -> dict[str, pa.Table]:
        """Copy catalog tables into memory (opening the file read-only for as short as possible);
        with ``run``, only its rows (of tables that have a run column)."""
        self.require()
        names = list(tables) if tables is not None else [t.name for t in schema.CATALOG_TABLES]
        where = "" if run is None else " WHERE run = $run"
        with self._catalog(read_only=True) as con:
            have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            # a table added to the schema after the store was made (run_tags) reads as empty until
            # the first write creates it (``initialize``: CREATE TABLE IF NOT EXISTS)
            return {
                n: con.sql(f'SELECT * FROM "{n}"{where}', params=None if run is None else {"run": run}).to_arrow_table()
                if n in have
                else schema.arrow_schema(n).empty_table()
                for n in names
            }

    def catalog_rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a query over the catalog tables alone, as dicts (opens the catalog read-only
        for as short as possible; no pyarrow, no pandas: what `analyze runs` needs to start fast)."""
        self.require()
        with self._catalog(read_only=True) as con:
            cur = con.execute(sql, list(params) if params else None)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def catalog_snapshot(self) -> dict[str, pa.Table]:
        """Every catalog table, as ``load_catalog()`` returns them, read again only when the catalog
        changed since the last snapshot of this store folder (kept per process; treat it as read-only).

        Every commit writes the catalog file or its write-ahead log, so their (inode, size, mtime)
        tell whether a snapshot is still the catalog; a snapshot read while a commit wrote is not kept.
        """
        return self._snapshot()[1]

    def stamped_catalog(self) -> tuple[tuple[Any, ...] | None, dict[str, pa.Table]]:
        """(stamp, tables): ``catalog_snapshot()`` and the state of the catalog files it was read
        from (a key of what is derived from this catalog); the stamp is None when the snapshot was
        read while a commit wrote (not kept: derive nothing lasting from it)."""
        return self._snapshot()

    def _snapshot(self) -> tuple[tuple[Any, ...] | None, dict[str, pa.Table]]:
        """(stamp, tables) of ``catalog_snapshot``; the stamp is None when the snapshot is not kept."""
        key = str(self.path)
        stamp = self._catalog_stamp()
        with _SNAPSHOT_LOCK:  # the server's request threads and the warm-up's share it
            hit = _SNAPSHOTS.get(key)
            if hit is not None and hit[0] == stamp:
                _SNAPSHOTS.move_to_end(key)
                return stamp, hit[1]
        tables = self.load_catalog()
        if self._catalog_stamp() != stamp:
            return None, tables
        with _SNAPSHOT_LOCK:
            _SNAPSHOTS[key] = (stamp, tables)
            _SNAPSHOTS.move_to_end(key)
            while len(_SNAPSHOTS) > _SNAPSHOT_FOLDERS:
                _SNAPSHOTS.popitem(last=False)
        return stamp, tables

    def _catalog_stamp(self) -> tuple[Any, ...]:
        """``digest.catalog_stamp`` as a hashable tuple (a key of the in-memory caches)."""
        return tuple(None if f is None else tuple(f) for f in digest.catalog_stamp(self.path))

    @contextlib.contextmanager
    def read_connection(
        self,
        run: str | None = None,
        ranks: Sequence[int] | None = None,
        tables: Sequence[str] | None = None,
        usable_only: bool = True,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with every table: the catalog's as in-memory copies, the facts as
        views over their Parquet files; the catalog file is not kept open.

        The fact views hold the rows whose times are usable (``sql.usable_times_sql``: no NULL or
        overflowing timestamp, no negative duration), what the analyses and the web app compute
        with; `analyze query` shows every row (``store.query``), and so does ``usable_only=False``.
        ``run`` / ``ranks`` restrict the fact views to those files (cheap for one rank of a big run).
        ``tables`` creates only those fact views (binding a view reads the footer of each of its
        Parquet files: a web request that needs two tables of a 64-rank run opens much faster).

        One in-memory database per catalog state holds the catalog's copy (per process, a few, the
        most recent); each set of views (run, ranks, tables) is a schema of it, bound on first use
        and kept while used lately, so the analyses of a report, or every request of the web app
        whatever ranks it reads, share one database and bind each set of views once. Each call gets
        a connection of its own (``cursor()``: safe across threads; its ``search_path`` names its
        views' schema, then the catalog's; what a caller registers or creates as TEMP goes with it).
        """
        stamp, cat = self._snapshot()
        if ranks is not None and run is not None and _every_rank(cat["fact_files"], run, ranks):
            ranks = None  # the same files as the whole run's: the same views
        views = (run, None if ranks is None else tuple(ranks), None if tables is None else tuple(sorted(tables)))
        key = (str(self.path), stamp)
        if stamp is None:  # a catalog read while a commit wrote: a database of its own, not kept
            db = _ReadDatabase(self._catalog_database(cat))
        else:
            with _READ_LOCK:
                db = _READ_DBS.get(key)
                if db is not None:
                    _READ_DBS.move_to_end(key)
            if db is None:
                made = _ReadDatabase(self._catalog_database(cat))
                with _READ_LOCK:
                    db = _READ_DBS.setdefault(key, made)
                    _READ_DBS.move_to_end(key)
                    while len(_READ_DBS) > _READ_DB_COUNT:
                        _READ_DBS.popitem(last=False)  # connections still open keep theirs alive
                if db is not made:
                    made.con.close()
        name = self._view_schema(db, cat, (*views, usable_only))
        con = db.con.cursor()
        try:
            con.execute(f"SET search_path = '{name},main'")
            yield con
        finally:
            con.close()
            with _READ_LOCK:
                db.in_use[name] -= 1

    def _catalog_database(self, cat: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
        import duckdb

        con = duckdb.connect(":memory:")
        # every view set and query of this database reads the footers of the same Parquet files (a
        # report runs ~100 queries over them): read each footer once. A fact file never changes under
        # its name (every write is a fresh name, listed by the catalog commit that makes it a fact).
        con.execute("SET parquet_metadata_cache = true")
        for name, tbl in cat.items():
            con.register(f"__cat_{name}", tbl)
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "__cat_{name}"')
            con.unregister(f"__cat_{name}")
        return con

    def _view_schema(self, db: _ReadDatabase, cat: dict[str, pa.Table], views: tuple[Any, ...]) -> str:
        """The schema of ``db`` holding the fact views ``views`` = (run, ranks, tables, usable_only)
        (created on first use; one thread creates it, the others asking meanwhile wait), marked in
        use until the caller releases it."""
        run, ranks, tables, usable_only = views
        while True:
            with _READ_LOCK:
                bound = _bound_set(db, views)
                if bound is not None:
                    name = db.schemas[bound]
                    db.schemas.move_to_end(bound)
                    db.in_use[name] = db.in_use.get(name, 0) + 1
                    return name
                wait = db.building.get(views)
                if wait is None:
                    wait = db.building[views] = threading.Event()
                    db.serial += 1
                    name = f"views_{db.serial}"
                    break
            wait.wait()
        try:
            con = db.con.cursor()
            try:
                con.execute(f"CREATE SCHEMA {name}")
                con.execute(f"SET schema = '{name}'")
                ff = filter_fact_files(cat["fact_files"], run=run, ranks=ranks)
                paths = fact_paths(str(self.path), ff)
                files = sum(len(p) for t, p in paths.items() if tables is None or t in tables)
                self._create_fact_views(
                    con,
                    paths,
                    only=tables,
                    comments=False,
                    usable_only=usable_only,
                    ranks=ranks,
                )
            finally:
                con.close()
            with _READ_LOCK:
                db.schemas[views] = name
                db.in_use[name] = db.in_use.get(name, 0) + 1
                db.files[name] = files
                drop = _idle_to_drop(db)
                for v, s in drop:
                    del db.schemas[v]
                    db.in_use.pop(s, None)
                    db.files.pop(s, None)
            if drop:
                with contextlib.closing(db.con.cursor()) as dropper:
                    for _, s in drop:
                        dropper.execute(f"DROP SCHEMA {s} CASCADE")
            return name
        finally:
            with _READ_LOCK:
                del db.building[views]
            wait.set()

    def unusable_rows(self, run: str) -> dict[str, int]:
        """Rows of ``run`` the fact views of ``read_connection`` leave out because their times are not
        usable (``sql.usable_times_sql``), by table (tables without any left out are not listed): the
        rows its files hold (the catalog's ``fact_files.rows``) less those its views read (the views
        an analysis reads, so a report binds no other set)."""
        tables = [t.name for t in schema.FACT_TABLES if usable_times_sql(t.name)]
        ff = filter_fact_files(self.catalog_snapshot()["fact_files"], run=run)
        held = ff.group_by("table_name").aggregate([("rows", "sum")])
        held_rows = dict(zip(held["table_name"].to_pylist(), held["rows_sum"].to_pylist()))
        tables = [t for t in tables if held_rows.get(t)]
        if not tables:
            return {}
        with self.read_connection(run=run, tables=tables) as con:
            row = con.execute(
                "SELECT " + ", ".join(f'(SELECT count(*) FROM "{t}") AS "{t}"' for t in tables)
            ).fetchone()
        out = {t: int(held_rows[t]) - int(n) for t, n in zip(tables, row)}
        return {t: n for t, n in out.items() if n}

    def _create_fact_views(
        self,
        con: duckdb.DuckDBPyConnection,
        paths: dict[str, list[str]],
        only: Sequence[str] | None = None,
        comments: bool = True,
        usable_only: bool = False,
        ranks: Sequence[int] | None = None,
    ) -> None:
        stmts = []
        for t in schema.FACT_TABLES:
            if only is not None and t.name not in only:
                continue
            select = fact_select_sql(t.name, paths.get(t.name, []), usable_only=usable_only, ranks=ranks)
            stmts.append(f'CREATE OR REPLACE VIEW "{t.name}" AS {select}')
            if comments:
                stmts.append(f"COMMENT ON VIEW \"{t.name}\" IS '{t.doc.replace(chr(39), chr(39) * 2)}'")
        if stmts:
            con.execute(";\n".join(stmts))

    def _refresh_fact_views(self, con: duckdb.DuckDBPyConnection, changed: set[str]) -> None:
        """Make again the catalog's fact views of the ``changed`` tables and of those missing (a
        store made before a table existed): binding a view reads the footer of each of its files,
        and a commit changes the files of a few tables only."""
        have = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        only = [t.name for t in schema.FACT_TABLES if t.name in changed or t.name not in have]
        if not only:
            return
        ff = con.sql(
            "SELECT table_name, path FROM fact_files WHERE list_contains($only, table_name)", params={"only": only}
        ).to_arrow_table()
        self._create_fact_views(con, fact_paths(str(self.path), ff), only=only)

    def fact_files(self, table: str, run: str | None = None, ranks: Sequence[int] | None = None) -> list[str]:
        """Absolute paths of the Parquet files of a table, optionally for one run / some ranks (an
        aggregate's run-level file holds the other ranks too: ``sql.fact_select_sql`` reads theirs only)."""
        ff = filter_fact_files(self.load_catalog(["fact_files"])["fact_files"], run=run, ranks=ranks, table=table)
        return fact_paths(str(self.path), ff).get(table, [])

    # -- queries --------------------------------------------------------------------------------

    def query(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        run: str | None = None,
        tables: Mapping[str, pa.Table] | None = None,
    ) -> pd.DataFrame:
        """One read-only SELECT over every table (of ``run`` only, when given) as a DataFrame, run under
        the lock-down of ``store.query`` with its default limits (a time limit, no row limit).

        ``tables``: more tables for this query, ``{"schema.name" or "name": Arrow table}`` (the analyses).
        """
        from .query import execute

        return execute(self, sql, params, run=run, tables=tables).frame

    # -- writing --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def ingest_lock(self, wait_seconds: float = 600.0, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Serialise the writers of one store: a second `analyze ingest` or an `analyze drop` waits for
        the first. ``on_wait`` is called once if the lock is held by another process. The holder owns
        the readers' scratch folder (``SCRATCH_DIR``): emptied when the lock is taken (what a killed
        holder's readers left) and when it is given back."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as fh:
            try:
                deadline = time.monotonic() + wait_seconds
                waited = False
                while True:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise StoreError(f"another ingest holds {self.lock_path}") from None
                        if not waited and on_wait is not None:
                            on_wait()
                        waited = True
                        time.sleep(0.2)
                import shutil  # only the ingest lock's holder needs it: `analyze runs` reads

                shutil.rmtree(self.scratch_dir, ignore_errors=True)
                try:
                    yield
                finally:
                    shutil.rmtree(self.scratch_dir, ignore_errors=True)
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def commit(
        self,
        run: str,
        root_path: str,
        replace_collections: Sequence[str],
        collections: Sequence[dict[str, Any]],
        fact_files: Sequence[dict[str, Any]],
        source_files: Sequence[dict[str, Any]],
        ingests: dict[str, dict[str, Any]] | None = None,
        run_tables: Sequence[str] = (),
    ) -> None:
        """Apply one ingest to the catalog in a single transaction.

        ``replace_collections``: ids whose old collection / fact_files / source_files rows are dropped first.
        ``run_tables``: tables whose every fact_files row of the run is dropped first (``fact_files``
        lists them all again: an aggregate's run-level file made anew, ``ingest.compact``).
        ``source_files``: rows replacing any existing rows with the same (run, path).
        ``ingests``: when given, the catalog's digest is written after the commit (``write_digest``).
        """
        now = utcnow()
        listing: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
        with self.write_connection() as con:
            con.execute("BEGIN")
            try:
                exists = con.execute("SELECT count(*) FROM runs WHERE run = ?", [run]).fetchone()[0]
                if exists:
                    con.execute("UPDATE runs SET updated_at = ?, root_path = ? WHERE run = ?", [now, root_path, run])
                else:
                    con.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", [run, root_path, now, now])
                # the fact tables whose list of files this commit changes: their views only are made again
                changed = {f["table_name"] for f in fact_files} | set(run_tables)
                if run_tables:
                    con.execute(
                        "DELETE FROM fact_files WHERE run = ? AND list_contains(?, table_name)", [run, list(run_tables)]
                    )
                if replace_collections:
                    ids = list(replace_collections)
                    changed.update(
                        r[0]
                        for r in con.execute(
                            "SELECT DISTINCT table_name FROM fact_files"
                            " WHERE run = ? AND list_contains(?, collection_id)",
                            [run, ids],
                        ).fetchall()
                    )
                    con.execute("DELETE FROM collections WHERE run = ? AND list_contains(?, collection_id)", [run, ids])
                    con.execute("DELETE FROM fact_files WHERE run = ? AND list_contains(?, collection_id)", [run, ids])
                    con.execute(
                        "DELETE FROM source_files WHERE run = ? AND list_contains(?, collection_id)", [run, ids]
                    )
                # the run's stored analyses were computed from what this commit changes (``run_results``)
                con.execute("DELETE FROM run_results WHERE run = ?", [run])
                if source_files:
                    paths = [r["path"] for r in source_files]
                    con.execute("DELETE FROM source_files WHERE run = ? AND list_contains(?, path)", [run, paths])
                self._insert(con, "collections", collections)
                self._insert(con, "fact_files", fact_files)
                self._insert(con, "source_files", source_files)
                self._refresh_fact_views(con, changed)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            if ingests is not None:
                listing = _listing(con)
        if ingests is not None and listing is not None:
            self._write_digest_after(ingests, *listing)

    def drop_run(self, run: str, on_wait: Callable[[], None] | None = None) -> bool:
        """Remove a run from the catalog and delete its files. Takes the ingest lock: a drop during an
        ingest of the same run waits for it (else that ingest's commit would bring the run back)."""
        self.require()
        with self.ingest_lock(on_wait=on_wait):  # one writer at a time: the digest after is this change's
            before = digest.read(self.path)
            with self.write_connection() as con:
                if not con.execute("SELECT count(*) FROM runs WHERE run = ?", [run]).fetchone()[0]:
                    return False
                con.execute("BEGIN")
                tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
                changed = {
                    r[0]
                    for r in con.execute("SELECT DISTINCT table_name FROM fact_files WHERE run = ?", [run]).fetchall()
                }
                for t in ("runs", "collections", "source_files", "fact_files", "run_tags", "run_results"):
                    if t in tables:  # run_tags, run_results: absent from stores made before they existed
                        con.execute(f'DELETE FROM "{t}" WHERE run = ?', [run])
                self._refresh_fact_views(con, changed)
                con.execute("COMMIT")
            self.garbage_collect()
            self.write_digest(dict((before or {}).get("ingests", {})))
        return True

    def commit_run_results(
        self, run: str, key: str, rows: Sequence[dict[str, Any]], only: Sequence[str] | None = None
    ) -> bool:
        """List the stored analyses of ``run`` (``run_results`` rows, their files written) in place of
        those it had (``only``: in place of those of these analyses, the others kept), if the run's
        content is still ``key``; else (the run changed or left) nothing is listed and the files are
        removed. Call under ``ingest_lock``. Returns whether they were listed."""
        from .runs import run_key

        with self.write_connection() as con:
            con.execute("BEGIN")
            try:
                ff = con.sql("SELECT * FROM fact_files WHERE run = $run", params={"run": run}).to_arrow_table()
                co = con.sql("SELECT * FROM collections WHERE run = $run", params={"run": run}).to_arrow_table()
                current = ff.num_rows and run_key({"fact_files": ff, "collections": co}, run) == key
                if current and only is None:
                    con.execute("DELETE FROM run_results WHERE run = ?", [run])
                elif current:
                    con.execute(
                        "DELETE FROM run_results WHERE run = ? AND list_contains(?, analysis)", [run, list(only)]
                    )
                if current:
                    self._insert(con, "run_results", [{**r, "run": run, "run_key": key} for r in rows])
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        if not current:
            for r in rows:
                (self.path / r["path"]).unlink(missing_ok=True)
        return bool(current)

    def write_digest(self, ingests: dict[str, dict[str, Any]]) -> None:
        """Write the catalog's digest (``digest``) as the catalog is now, with what the last ingest of
        each run found (``ingests``: by run; a run no longer in the store is left out). Call after
        a change, under ``ingest_lock``."""
        held = self._held_by_me()
        stamp = None if held is not None else digest.catalog_stamp(self.path)
        with self._catalog(read_only=True) as con:
            runs, problems = _listing(con)
        if stamp is None:
            self._write_digest_after(ingests, runs, problems)
        else:
            self._digest(ingests, runs, problems, stamp)

    def _write_digest_after(
        self, ingests: dict[str, dict[str, Any]], runs: list[dict[str, Any]], problems: list[dict[str, Any]]
    ) -> None:
        """Write the digest now, or when the held connection closes (``catalog_held``)."""
        held = self._held_by_me()
        if held is not None:
            held[1].append((ingests, runs, problems))
        else:
            self._digest(ingests, runs, problems, digest.catalog_stamp(self.path))

    def _digest(
        self,
        ingests: dict[str, dict[str, Any]],
        runs: list[dict[str, Any]],
        problems: list[dict[str, Any]],
        stamp: list[Any],
    ) -> None:
        names = {r["run"] for r in runs}
        digest.write(self.path, runs, problems, {k: v for k, v in ingests.items() if k in names}, stamp)

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> None:
        import pyarrow as pa

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
        cat = self.load_catalog(["fact_files", "run_results"])
        live = set(cat["fact_files"].column("path").to_pylist()) | set(cat["run_results"].column("path").to_pylist())
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


def _listing(con: duckdb.DuckDBPyConnection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What `analyze runs` shows: its rows of runs and of file problems."""
    from .runs import PROBLEMS_SQL, RUNS_SQL

    out = []
    for sql in (RUNS_SQL, PROBLEMS_SQL.format(where="")):
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        out.append([dict(zip(names, row)) for row in cur.fetchall()])
    return out[0], out[1]
