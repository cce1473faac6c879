"""A store outlives the version that wrote it: every column of a fact or aggregate table may be
missing from files written before it was added to the schema. The read layer (``store.sql``)
reads such a column as NULL (or computes it by its ``derive`` SQL), in the views of the analyses
and the web app, in `analyze query`, and in a run whose collections two versions wrote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from webapp_helpers import KINETO, NPU, render_page

from analyzer import schema
from analyzer.cli import main
from analyzer.store import Store, execute, fact_select_sql
from analyzer.store.layout import is_run_file
from webapp import create_app


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Store:
    return Store(ingested(tmp_path_factory.mktemp("older_files") / "store", (KINETO, "gloo"), (NPU, "npu")))


def _files(store: Store) -> dict[str, list[Path]]:
    """Each table's files, once each (an aggregate's run file is listed by every collection of its run)."""
    out: dict[str, list[Path]] = {}
    for t, p in store.query("SELECT DISTINCT table_name, path FROM fact_files ORDER BY path").itertuples(index=False):
        out.setdefault(t, []).append(store.path / p)
    return out


def _write_without(files: list[Path], columns: set[str], originals: dict[Path, pa.Table] | None = None) -> None:
    """``files`` written again without ``columns`` (from ``originals`` when given, else as they are)."""
    for f in files:
        tbl = originals[f] if originals else pq.read_table(f)
        pq.write_table(tbl.drop_columns([c for c in tbl.column_names if c in columns]), f)


def _quote(c: str) -> str:
    return '"' + c + '"'


def _counts(table: str, files: list[Path], con: duckdb.DuckDBPyConnection | None = None) -> dict[str, int]:
    """Per column the non-NULL values the view over ``files`` reads (the SELECT of the analyses and
    the web app: ``fact_select_sql``)."""
    cols = schema.FACTS[table].column_names
    counts = ", ".join(f"count({_quote(c)})" for c in cols)
    sql = f"SELECT {counts} FROM ({fact_select_sql(table, [str(f) for f in files])})"
    if con is None:
        with duckdb.connect() as own:
            return dict(zip(cols, own.execute(sql).fetchone()))
    return dict(zip(cols, con.execute(sql).fetchone()))


def _query_counts(store: Store, table: str) -> dict[str, int]:
    """The same through the views of `analyze query` (``store.execute``)."""
    cols = schema.FACTS[table].column_names
    counts = ", ".join(f"count({_quote(c)}) AS {_quote(c)}" for c in cols)
    return dict(zip(cols, execute(store, f"SELECT {counts} FROM {_quote(table)}").frame.iloc[0]))


def test_every_column_missing_from_every_file_reads_null(store: Store) -> None:
    """For every table the store has files of, each column in turn dropped from the files of one
    rank (the view of one rank, as the web app's pages make them): the view still reads the
    table, that column NULL (a ``derive`` column computed) and the others as before. Then every
    column but run and rank dropped from all its files: `analyze query`'s view reads them NULL."""
    files = _files(store)
    tables = [t for t in schema.FACT_TABLES if t.name in files]
    assert {"slices", "operators", "comm_ops", "agg_step_breakdown", "agg_operator_stats"} <= {t.name for t in tables}
    checked = 0
    with duckdb.connect() as con:
        for t in tables:
            one = files[t.name][:1]
            originals = {f: pq.read_table(f) for f in files[t.name]}
            before = _counts(t.name, one, con)
            everywhere = _query_counts(store, t.name)
            try:
                for c in t.columns:
                    _write_without(one, {c.name}, originals)
                    after = _counts(t.name, one, con)
                    assert after == {**before, c.name: after[c.name] if c.derive else 0}, f"{t.name}.{c.name}"
                    checked += 1
                _write_without(files[t.name], set(t.column_names) - {"run", "rank"}, originals)
                derived = {c.name for c in t.columns if c.derive}
                got = _query_counts(store, t.name)
                assert {c: n for c, n in got.items() if c not in derived} == {
                    c: everywhere[c] if c in ("run", "rank") else 0 for c in t.column_names if c not in derived
                }, t.name
            finally:
                for f, tbl in originals.items():
                    pq.write_table(tbl, f)
    assert checked == sum(len(t.columns) for t in tables)


def test_a_run_whose_files_two_versions_wrote_reads_null_from_the_older(store: Store, tmp_path: Path) -> None:
    """One rank's files with every column, the other's without one (a rank ingested again by a
    newer version): the column's values of the first, NULL for the second, in both orders. An
    aggregate's run file (every rank's rows, ``ingest.compact``) is cut into the per-collection
    files a store written before run files holds."""
    files = _files(store)
    for t in ("operators", "comm_ops", "agg_step_breakdown"):
        gloo = [f for f in files[t] if "run=gloo" in f.parts]
        if len(gloo) == 1 and is_run_file(str(gloo[0])):
            whole = pq.read_table(gloo[0])
            gloo = [tmp_path / f"{t}-rank{r}.parquet" for r in (0, 1)]
            for r, f in enumerate(gloo):
                pq.write_table(whole.filter(pc.equal(whole["rank"], r)), f)
        assert len(gloo) == 2, gloo
        col = next(c for c in schema.FACTS[t].columns if c.name not in ("run", "rank") and not c.derive)
        originals = {f: pq.read_table(f) for f in gloo}
        try:
            full = _counts(t, gloo[:1])[col.name]
            _write_without(gloo[1:], {col.name})
            for order in (gloo, gloo[::-1]):
                with duckdb.connect() as con:
                    sql = fact_select_sql(t, [str(f) for f in order])
                    got = con.execute(f'SELECT rank, count("{col.name}") FROM ({sql}) GROUP BY rank ORDER BY rank')
                    assert dict(got.fetchall()) == {0: full, 1: 0}, (t, col.name)
        finally:
            for f, tbl in originals.items():
                pq.write_table(tbl, f)


def _write_without_empty_columns(files: list[Path]) -> int:
    """Every file written again without its columns that hold no value (but run and rank): what a
    file written before such a column existed holds there as well (nothing), so nothing may change
    when they are missing. The number of columns dropped."""
    dropped = 0
    for f in files:
        tbl = pq.read_table(f)
        empty = [c for c in tbl.column_names if tbl[c].null_count == len(tbl) and c not in ("run", "rank")]
        pq.write_table(tbl.drop_columns(empty), f)
        dropped += len(empty)
    return dropped


def _outputs(store: Path) -> Iterator[tuple[str, str]]:
    for args in (
        ["report", "--run", "gloo"],
        ["report", "--run", "npu"],
        ["summary", "--run", "gloo"],
        ["diff", "gloo", "npu"],
        ["query", "SELECT run, rank, count(*) AS n FROM operators GROUP BY ALL ORDER BY ALL"],
    ):
        res = CliRunner().invoke(main, [*args, "--store", str(store)])
        assert res.exit_code == 0, (args, res.output)
        yield " ".join(args), res.output


def _pages(store: Path) -> Iterator[tuple[str, str]]:
    import dash

    http = create_app(store).server.test_client()
    paths = sorted({p["path"] for p in dash.page_registry.values()})
    assert {"/", "/timeline", "/operators", "/communication"} <= set(paths), paths
    for path in paths:
        for query in ("?run=gloo", "?run=npu", "?base=gloo&new=npu"):
            answers = json.dumps(render_page(http, path + query))
            assert "Traceback" not in answers and "BinderException" not in answers, path + query
            yield path + query, answers


def test_analyses_and_pages_of_files_without_their_empty_columns(store: Store, tmp_path: Path) -> None:
    """Every column that holds no value in a file dropped from it, in every file of every table (a
    store written before those columns existed, e.g. ``operators.peer``; some of a run's files
    with a column, some without): `analyze
    report / summary / diff / query` print the same as over the complete files, and every page
    renders with no error shown (the same error texts as over the complete files)."""
    import shutil

    old = Store(shutil.copytree(store.path, tmp_path / "old"))
    assert _write_without_empty_columns([f for fs in _files(old).values() for f in fs]) >= 20
    assert dict(_outputs(old.path)) == {k: v.replace(str(store.path), str(old.path)) for k, v in _outputs(store.path)}
    errors = {a: a_json.count("msg-error") for a, a_json in _pages(store.path)}
    assert {a: a_json.count("msg-error") for a, a_json in _pages(old.path)} == errors
