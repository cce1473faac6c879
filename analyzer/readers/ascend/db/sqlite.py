"""A profiler db opened read-only, the SQL helpers every table reader uses, and the state of one
collection while its tables are read (``DbExport``).

``read_only(path)`` is the one way a profiler db is opened (the table readers, discovery's rank
lookup, the group layouts): nothing is ever written next to the user's file. A db alone is opened
``immutable`` (no lock, no ``-shm``). A db with a ``-wal`` (rows committed but not yet checkpointed:
the profiler was killed, or the copy was taken while it ran) or a hot ``-journal`` is copied with
it into a private temporary folder and opened there, where SQLite may create its ``-shm`` or roll the
journal back: ``immutable=1`` on the original would silently hide the WAL's rows (one db kept 4 of
its 191 kernels), and a plain read-only open would create ``-shm`` beside the user's file.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import InputError
from ....messages import problem
from ...base import ReadContext
from ...common.cells import text_cell
from ...common.steps import last_step_started

BATCH = 100_000


def _has_bytes(p: Path) -> bool:
    try:
        return p.stat().st_size > 0
    except OSError:
        return False


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the profiler db ``path`` that sees every committed row and writes nothing
    beside it (see the module's text); ``sqlite3.Error`` / ``OSError`` when it cannot be opened."""
    side = [q for q in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal")) if _has_bytes(q)]
    if not side:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            yield con
        finally:
            con.close()
        return
    with tempfile.TemporaryDirectory(prefix="rankscope-db-") as tmp:
        copy = Path(tmp) / "profiler.db"
        shutil.copyfile(path, copy)
        for q in side:  # the same suffix beside the copy: -wal or -journal
            shutil.copyfile(q, Path(tmp) / f"profiler.db{q.name[len(path.name) :]}")
        con = sqlite3.connect(copy)  # a private copy: SQLite may replay the WAL, roll a journal back
        try:
            yield con
        finally:
            con.close()


def sqlite_problem(exc: BaseException) -> str:
    """What is wrong with a db, in SQLite's words ("database disk image is malformed", "malformed
    database schema (...)"). SQLite's message quotes the damaged bytes; when they are not UTF-8
    Python raises UnicodeDecodeError on the message itself: it is decoded here, bad bytes as U+FFFD."""
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        return problem("sqlite.not_utf8", detail=exc.object.decode("utf-8", "replace"))
    return str(exc)


class _Text:
    """The db's text values as str: valid UTF-8 as it is; text that is not (a flipped byte, a
    damaged page) with U+FFFD for the bad bytes, remembered, for the table's reader to name the
    rows (``Db.take_problems``) instead of losing the table."""

    def __init__(self) -> None:
        self.bad: list[str] = []

    def __call__(self, b: bytes) -> str:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            text = b.decode("utf-8", "replace")
            self.bad.append(text)
            return text


_CREATE = re.compile(r'CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?["`\[]?([^"`\]\s(]+)', re.I)


class Db:
    """A read-only sqlite3 connection with the table list and column names at hand.

    A damaged db keeps what can be read: a schema SQLite calls malformed is read with its checks
    off (``writable_schema``; the tables it still finds are read, the damage is a warning), text
    that is not UTF-8 is kept with U+FFFD and its rows named, a table whose pages are damaged keeps
    the rows before the damage. What was wrong is in ``problems`` / ``take_problems``."""

    def __init__(self, path: Path, kind: str):
        self.path = path
        self.kind = kind
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InputError(str(path), problem("cannot_read_kind", kind=kind, detail=exc.strerror or exc)) from exc
        if size == 0:
            raise InputError(str(path), problem("empty_expected", kind=kind))
        with open(path, "rb") as f:
            magic = f.read(16)
        if magic != b"SQLite format 3\x00":
            raise InputError(str(path), problem("not_sqlite", kind=kind))
        self._open = contextlib.ExitStack()
        self.problems: list[str] = []  # the db's damage, said once (the schema)
        self._text = _Text()
        self._notes: list[tuple[str, int]] = []  # damage met in the current table: (what, after row) (take_problems)
        self._bad_rows: list[int] = []  # numbers of the rows (of their query) that held text not UTF-8
        try:
            self.con = self._open.enter_context(read_only(path))
            self.con.text_factory = self._text
            self.tables = self._table_names()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            self._open.close()
            raise InputError(str(path), problem("sqlite_corrupt", kind=kind, detail=sqlite_problem(exc))) from exc
        self._cols: dict[str, set[str]] = {}

    def _table_names(self) -> set[str]:
        try:
            return {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            why = sqlite_problem(exc)
        # a schema SQLite will not parse: read with its checks off, each table by its CREATE statement
        self.con.execute("PRAGMA writable_schema = ON")
        rows = self.con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        self._text.bad.clear()  # the damaged name is the schema's damage, said below
        names = set()
        for name, sql in rows:
            m = _CREATE.match(sql or "")
            names.add(m.group(1) if m else name)
        if names:
            self.problems.append(problem("schema_damaged", detail=why, n=len(names), names=", ".join(sorted(names))))
        else:
            self.problems.append(problem("schema_damaged_none", detail=why, n=0))
        return names

    def take_problems(self, table: str) -> list[str]:
        """The damage met since the last call, said of ``table``: text that is not UTF-8 (kept with
        U+FFFD), rows cut off by a damaged page."""
        out = [problem("table_cut", table=table, detail=detail, n=n) for detail, n in self._notes]
        if self._text.bad:
            bad, rows = self._text.bad, self._bad_rows
            key = "not_utf8_rows" if len(rows) > 1 else "not_utf8_row" if rows else "not_utf8"
            shown = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
            out.append(problem(key, table=table, n=len(bad), numbers=shown, example=repr(bad[0][:60])))
            self._text.bad, self._bad_rows = [], []
        self._notes = []
        return out

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        if table not in self._cols:
            try:
                self._cols[table] = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")').fetchall()}
            except (sqlite3.Error, UnicodeDecodeError):
                self._cols[table] = set()
        return self._cols[table]

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return [r for rows in self.batches(sql, params) for r in rows]

    def batches(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of a query, ``BATCH`` at a time. A damaged page met on the way ends the rows: those
        before it are kept (read again one by one up to it) and the damage noted (``take_problems``);
        a query that cannot start raises."""
        cur = self.con.execute(sql, params)
        done = 0
        while True:
            seen_bad = len(self._text.bad)
            try:
                rows = cur.fetchmany(BATCH)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
                rows = self._rows_before_damage(sql, params, done)
                self._notes.append((sqlite_problem(exc), done + len(rows)))
                if rows:
                    yield rows
                return
            if not rows:
                return
            if len(self._text.bad) > seen_bad:  # the rows that held it, by the identity of the text
                new = set(map(id, self._text.bad[seen_bad:]))
                self._bad_rows += [done + i + 1 for i, r in enumerate(rows) if any(id(v) in new for v in r)]
            done += len(rows)
            yield rows

    def _rows_before_damage(self, sql: str, params: tuple[Any, ...], skip: int) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        try:
            cur = self.con.execute(sql, params)
            for i, row in enumerate(cur):
                if i >= skip:
                    out.append(row)
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            pass
        return out

    def close(self) -> None:
        self._open.close()


def columns_of(rows: list[tuple[Any, ...]], n: int) -> list[list[Any]]:
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def table_problem(table: str, fn: Callable[[], None]) -> str | None:
    """Run ``fn`` (the reader of one table); the sentence that says why the table was skipped when it
    could not be read: SQLite's error, or a value of a type the table's reader cannot use (text in a
    time column, a blob for a number) or that no 64-bit integer holds. The other tables are read."""
    try:
        fn()
    except sqlite3.Error as exc:
        return problem("table_unreadable", table=table, detail=sqlite_problem(exc))
    except UnicodeDecodeError as exc:
        if isinstance(exc.object, bytes) and re.search(rb"malformed|database|no such", exc.object):  # SQLite's
            return problem("table_unreadable", table=table, detail=sqlite_problem(exc))
        return problem("table_bad_value", table=table, detail=f"unicodedecodeerror: {exc}")
    except (ValueError, TypeError, OverflowError, UnicodeError) as exc:
        return problem("table_bad_value", table=table, detail=f"{type(exc).__name__.lower()}: {exc}")
    return None


def _json_default(o: Any) -> Any:
    return o.decode("utf-8", "replace") if isinstance(o, (bytes, bytearray)) else str(o)


def args_json(d: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in d.items() if v is not None}, ensure_ascii=False, default=_json_default)


def sql_string(col: str, alias: str) -> str:
    """SQL for a STRING_IDS lookup of ``col``."""
    return f"(SELECT value FROM STRING_IDS WHERE id = {col}) AS {alias}"


def enum_names(db: Db, table: str) -> dict[int, str]:
    if not db.has(table):
        return {}
    return {int(i): str(n) for i, n in db.all(f"SELECT id, name FROM {table}")}


def db_text(v: Any) -> str | None:
    """A db string as the text export would give it: N/A and empty as NULL."""
    return text_cell(str(v)) if v is not None else None


class DbExport:
    """State of one collection while its tables are read."""

    def __init__(self, ctx: ReadContext, db: Db):
        self.ctx = ctx
        self.db = db
        self.event_base = 0
        self.lane_counts: Counter[tuple[str, str]] = Counter()
        self.lane_names: dict[tuple[str, str], tuple[str, str, str]] = {}  # -> (process, lane, group)
        self.steps: list[tuple[int, int, int]] = []
        self.problems: list[str] = []
        self.has_stacks = False
        self.has_shapes = False
        self.devices: set[int] = set()
        self.api_types: dict[int, str] = {}
        self.comm_groups: dict[int, str] = {}  # groupName string id -> hash
        self.group_lane: dict[str, str] = {}
        self.kernel_of_task: tuple[np.ndarray, np.ndarray] | None = None
        self.cann_levels: Counter[str] = Counter()
        self.comm_ops_raw: list[dict[str, Any]] = []
        self.notes: list[str] = []  # facts about the db worth keeping in the collection meta

    # -- helpers -----------------------------------------------------------------------------------

    def step_of(self, ts: int | None) -> int | None:
        """Step of a device task: the last step started at or before it (device work lags the host)."""
        return last_step_started(self.steps, [ts])[0]

    def guard(self, what: str, fn: Callable[[], None]) -> None:
        problem = table_problem(what, fn)
        if problem:
            self.problems.append(problem)
        self.problems += self.db.take_problems(what)

    def slices(
        self,
        pid: list[str],
        tid: list[str],
        name: list[str],
        cat: list[str | None],
        ts: list[int],
        end: list[int],
        args: list[str | None],
    ) -> None:
        n = len(ts)
        if not n:
            return
        ts_a = np.asarray(ts, dtype=np.int64)
        dur = np.asarray(end, dtype=np.int64) - ts_a  # a negative one is named by the fact writer, not clamped
        self.ctx.write(
            "slices",
            {
                "pid": pid,
                "tid": tid,
                "name": name,
                "category": cat,
                "ts_ns": ts_a,
                "dur_ns": dur,
                "event_id": np.arange(self.event_base, self.event_base + n, dtype=np.int64),
                "args": args,
            },
        )
        self.event_base += n
        self.lane_counts.update(zip(pid, tid))

    def lane(self, pid: str, tid: str, process: str, lane: str, group: str) -> None:
        self.lane_names.setdefault((pid, tid), (process, lane, group))
