"""Baselines and tags: names users give runs, kept in the catalog table ``run_tags``.

- A **baseline** is a name for exactly one run (``analyze baseline tag NAME RUN``); tagging another
  run with the same name moves it. ``analyze check RUN --against baseline:NAME`` compares with it.
- A **tag** is a label any number of runs carry (``analyze tag add nightly RUN...``); ``analyze trend
  --tag nightly`` follows those runs.

Writes take the store's ingest lock and change the catalog in one transaction, in which the run is
checked too, so a name never points at a run that an ``analyze drop`` removed (which removes its
names in its own transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import duckdb
import pyarrow.compute as pc

from ..errors import InvalidNameError, UnknownBaselineError, UnknownRunError
from ..messages import message
from .runs import Catalog, _catalog, resolve_run
from .store import Store, utcnow

BASELINE = "baseline"
TAG = "tag"
KINDS = (BASELINE, TAG)
BASELINE_PREFIX = "baseline:"  # `--against baseline:NAME`
RUN_PREFIX = "run:"  # `--against run:NAME`: a run whose name starts with "baseline:"
MAX_NAME = 200

T = TypeVar("T")


@dataclass(frozen=True)
class RunTag:
    kind: str  # baseline | tag
    name: str
    run: str
    tagged_at: datetime


def check_name(name: str) -> str:
    """A usable baseline or tag name (stripped), else InvalidNameError saying why."""
    text = (name or "").strip()
    if not text:
        raise InvalidNameError("a baseline or tag name cannot be empty")
    if len(text) > MAX_NAME:
        raise InvalidNameError(f"a baseline or tag name has at most {MAX_NAME} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise InvalidNameError("a baseline or tag name cannot hold control characters")
    return text


def run_tags(source: Store | Catalog, kind: str | None = None, run: str | None = None) -> list[RunTag]:
    """Every name of the store (of one kind, on one run), by kind, name and run."""
    t = _catalog(source)["run_tags"]
    if kind is not None:
        t = t.filter(pc.equal(t["kind"], kind))
    if run is not None:
        t = t.filter(pc.equal(t["run"], run))
    rows = [RunTag(r["kind"], r["name"], r["run"], r["tagged_at"]) for r in t.to_pylist()]
    return sorted(rows, key=lambda r: (r.kind, r.name, r.run))


def baseline_run(source: Store | Catalog, name: str) -> str:
    """The run the baseline ``name`` points at; UnknownBaselineError names the baselines there are."""
    for t in run_tags(source, BASELINE):
        if t.name == name:
            return t.run
    have = [t.name for t in run_tags(source, BASELINE)]
    there = ", ".join(have) if have else "none (name one: `analyze baseline tag NAME RUN`)"
    raise UnknownBaselineError(f"no baseline named {name!r}; baselines: {there}")


def resolve_ref(source: Store | Catalog, ref: str) -> str:
    """``baseline:NAME`` → the baseline's run, ``run:NAME`` or a plain name → that run (checked)."""
    if ref.startswith(BASELINE_PREFIX):
        return baseline_run(source, ref[len(BASELINE_PREFIX) :])
    if ref.startswith(RUN_PREFIX):
        ref = ref[len(RUN_PREFIX) :]
    return resolve_run(source, ref)


def _write(store: Store, change: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """``change(con)`` in one catalog transaction under the ingest lock (the table is created in a
    store made before it existed)."""
    store.require()
    with store.ingest_lock():
        store.initialize()
        with store.write_connection() as con:
            con.execute("BEGIN")
            try:
                out = change(con)
                con.execute("COMMIT")
                return out
            except BaseException:
                con.execute("ROLLBACK")
                raise


def _require_runs(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> None:
    have = {r[0] for r in con.execute("SELECT run FROM runs").fetchall()}
    missing = [r for r in runs if r not in have]
    if missing:
        shown = ", ".join(sorted(have)[:20])
        runs = message("error.runs_in_store", shown=shown, more="") if shown else message("error.no_runs_in_store")
        raise UnknownRunError.said("error.no_run", run=repr(missing[0]), runs=runs)


def tag_baseline(store: Store, name: str, run: str) -> str | None:
    """Point the baseline ``name`` at ``run``; returns the run it pointed at before (None: new)."""
    name = check_name(name)

    def change(con: duckdb.DuckDBPyConnection) -> str | None:
        _require_runs(con, [run])
        row = con.execute("SELECT run FROM run_tags WHERE kind = ? AND name = ?", [BASELINE, name]).fetchone()
        con.execute("DELETE FROM run_tags WHERE kind = ? AND name = ?", [BASELINE, name])
        con.execute("INSERT INTO run_tags VALUES (?, ?, ?, ?)", [BASELINE, name, run, utcnow()])
        return None if row is None else str(row[0])

    return _write(store, change)


def remove_baseline(store: Store, name: str) -> str | None:
    """Remove the baseline ``name``; returns the run it pointed at (None: there was none)."""

    def change(con: duckdb.DuckDBPyConnection) -> str | None:
        row = con.execute("SELECT run FROM run_tags WHERE kind = ? AND name = ?", [BASELINE, name]).fetchone()
        con.execute("DELETE FROM run_tags WHERE kind = ? AND name = ?", [BASELINE, name])
        return None if row is None else str(row[0])

    return _write(store, change)


def _tagged(con: duckdb.DuckDBPyConnection, tag: str) -> list[str]:
    return [r[0] for r in con.execute("SELECT run FROM run_tags WHERE kind = ? AND name = ?", [TAG, tag]).fetchall()]


def add_tag(store: Store, tag: str, runs: Iterable[str]) -> list[str]:
    """Put ``tag`` on ``runs``; returns the runs that did not carry it yet."""
    tag = check_name(tag)
    runs = list(dict.fromkeys(runs))

    def change(con: duckdb.DuckDBPyConnection) -> list[str]:
        _require_runs(con, runs)
        have = set(_tagged(con, tag))
        added = [r for r in runs if r not in have]
        now = utcnow()
        for r in added:
            con.execute("INSERT INTO run_tags VALUES (?, ?, ?, ?)", [TAG, tag, r, now])
        return added

    return _write(store, change)


def remove_tag(store: Store, tag: str, runs: Iterable[str] | None = None) -> list[str]:
    """Take ``tag`` off ``runs`` (None: off every run); returns the runs it was taken off."""
    only = None if runs is None else list(dict.fromkeys(runs))

    def change(con: duckdb.DuckDBPyConnection) -> list[str]:
        have = _tagged(con, tag)
        gone = [r for r in have if only is None or r in only]
        for r in gone:
            con.execute("DELETE FROM run_tags WHERE kind = ? AND name = ? AND run = ?", [TAG, tag, r])
        return sorted(gone)

    return _write(store, change)


def tags_by_run(source: Store | Catalog) -> dict[str, dict[str, list[str]]]:
    """``{run: {"baseline": [names], "tag": [names]}}`` for the runs that have names."""
    out: dict[str, dict[str, Any]] = {}
    for t in run_tags(source):
        out.setdefault(t.run, {BASELINE: [], TAG: []})[t.kind].append(t.name)
    return out
