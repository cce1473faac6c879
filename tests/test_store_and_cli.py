"""The store's schema is documented everywhere; the CLI is documented, read-only where it says so."""

from __future__ import annotations

import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from helpers import REPO, analyze

from analyzer import schema
from analyzer.cli import main
from analyzer.format import fmt_ns
from analyzer.store import Store

SAMPLES = REPO / "sample_data"


@pytest.fixture(scope="module")
def kineto_store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Path:
    kineto = SAMPLES / "kineto_gloo_2rank"
    return ingested(tmp_path_factory.mktemp("st") / "store", (kineto, "kineto_gloo_2rank"))


def test_every_table_and_column_is_documented(kineto_store: Path) -> None:
    for t in schema.ALL_TABLES:
        assert t.doc.strip(), t.name
        for c in t.columns:
            assert c.doc.strip(), f"{t.name}.{c.name}"
            unit_words = ("_ns", "_bytes", "_per_s", "_pct", "_ns2")
            if c.type in ("BIGINT", "DOUBLE") and any(w in c.name for w in ("time", "dur", "size")):
                assert c.name.endswith(unit_words), f"{t.name}.{c.name} has no unit in its name"
    con = duckdb.connect(str(kineto_store / "catalog.duckdb"), read_only=True)
    try:
        tables = dict(con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall())
        cols = {
            (t, c): cm
            for t, c, cm in con.execute("SELECT table_name, column_name, comment FROM duckdb_columns()").fetchall()
        }
        views = dict(con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall())
    finally:
        con.close()
    for t in schema.CATALOG_TABLES:
        assert tables[t.name], t.name
        for c in t.columns:
            assert cols[(t.name, c.name)], f"{t.name}.{c.name}"
    for t in schema.FACT_TABLES:
        assert views[t.name], f"fact view {t.name} missing or uncommented"


def test_catalog_views_work_with_plain_duckdb(kineto_store: Path) -> None:
    # a user can open the catalog with any DuckDB and query the facts directly
    con = duckdb.connect(str(kineto_store / "catalog.duckdb"), read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM slices").fetchone()[0]
        ranks = con.execute("SELECT DISTINCT rank FROM operators ORDER BY 1").fetchall()
    finally:
        con.close()
    assert n > 1000 and ranks == [(0,), (1,)]


def test_query_is_read_only(kineto_store: Path) -> None:
    for sql in (
        "DELETE FROM runs",
        "CREATE TABLE x AS SELECT 1",
        "COPY (SELECT 1) TO 'out.csv'",
        "INSERT INTO runs VALUES ('x', 'y', now(), now())",
        "SELECT 1; DROP TABLE runs",
    ):
        proc = analyze("query", sql, "--store", str(kineto_store), check=False)
        assert proc.returncode == 1, sql
        assert "only read-only SELECT queries are allowed" in proc.stderr
        assert "Traceback" not in proc.stderr
    bad = analyze("query", "SELECT nope FROM kernels", "--store", str(kineto_store), check=False)
    assert bad.returncode == 1 and "nope" in bad.stderr and "Traceback" not in bad.stderr
    assert Store(kineto_store).query("SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_store_location_flag_env_and_default(tmp_path: Path) -> None:
    env_store = tmp_path / "from_env"
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), env={"RANKSCOPE_STORE": str(env_store)})
    assert (env_store / "catalog.duckdb").exists()
    missing = analyze("runs", "--store", str(tmp_path / "nothing-here"), check=False)
    assert missing.returncode == 1 and "analyze ingest" in missing.stderr


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    runner = CliRunner()
    for name, cmd in main.commands.items():
        res = runner.invoke(main, [name, "--help"])
        assert res.exit_code == 0, name
        assert cmd.help and cmd.help.strip(), name
        assert re.search(rf"analyze {name}\b", readme), f"`analyze {name}` is not documented in README.md"


def test_summary_values_match_the_traces(kineto_store: Path) -> None:
    from helpers import analyze_json, trace_events

    s = analyze_json("summary", "--json", "--store", str(kineto_store))
    for r in s["ranks"]:
        events = [
            e
            for f in sorted((SAMPLES / "kineto_gloo_2rank" / f"rank_{r['rank']}").rglob("*.pt.trace.json"))
            for e in trace_events(f)
        ]
        steps = {e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}
        assert r["steps"] == len(steps)
        comm = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("gloo:")]
        assert r["comm_ops"] == len(comm)
        assert r["comm_ns"] == sum(round(e["dur"] * 1000) for e in comm)
        sizes = [d for e in comm for d in e["args"]["Input Dims"]]  # float32 tensors: 4 bytes each
        assert r["comm_bytes"] == sum(4 * math.prod(dims) for dims in sizes)
        mem = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
        assert r["peak_allocated_bytes"] == max(mem)


def test_schema_doc_is_current() -> None:
    doc = (REPO / "docs" / "schema.md").read_text()
    assert schema.describe() in doc, "docs/schema.md is stale: run `analyze schema --markdown` and update it"


def test_read_connections_share_one_database_per_catalog(kineto_store: Path, tmp_path: Path) -> None:
    """The analyses of a report open many read connections: they share one in-memory database per
    catalog state and views; what one caller makes for itself (TEMP, registered, added tables of a
    query) does not reach the next; a new ingest (new catalog) gets a new database."""
    import pyarrow as pa

    store = Store(kineto_store)
    with store.read_connection() as a:
        a.execute("CREATE TEMP TABLE mine AS SELECT 1 AS x")
        n = a.execute("SELECT count(*) FROM slices").fetchone()[0]
    with store.read_connection() as b:
        assert b.execute("SELECT count(*) FROM slices").fetchone()[0] == n > 0
        assert b.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'mine'").fetchone()[0] == 0
    extra = {"analysis.t": pa.table({"x": [1, 2]})}
    for _ in range(2):  # the added table lives in the query's own database only
        assert store.query("SELECT sum(x) AS s FROM analysis.t", tables=extra)["s"].iloc[0] == 3
    with store.read_connection() as c:
        assert c.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'analysis'").fetchone()[0] == 0

    # other view sets (ranks, tables, usable_only) live in the same database, each connection sees
    # its own, also when threads ask for them at once
    per_rank = {r: store.query("SELECT count(*) AS n FROM slices WHERE rank = ?", [r])["n"].iloc[0] for r in (0, 1)}
    assert sum(per_rank.values()) == n

    def count(r: int) -> tuple[int, int, int]:
        with store.read_connection(ranks=[r], tables=["slices"]) as con:
            mine = con.execute("SELECT count(*), min(rank), max(rank) FROM slices").fetchone()
            with pytest.raises(duckdb.CatalogException):  # only the tables asked for
                con.execute("SELECT count(*) FROM kernels")
            assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1  # the catalog behind them
            return mine

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(count, [0, 1, 0, 1])) == [(per_rank[r], r, r) for r in (0, 1, 0, 1)]
    with store.read_connection() as d:
        assert d.execute("SELECT count(*) FROM slices").fetchone()[0] == n
        views = "SELECT count(*) FROM duckdb_schemas() WHERE schema_name LIKE 'views\\_%' ESCAPE '\\'"
        assert d.execute(views).fetchone()[0] >= 3

    other = tmp_path / "store"
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(other), "--run", "a")
    before = Store(other).query("SELECT count(DISTINCT run) AS n FROM slices")["n"].iloc[0]
    analyze("ingest", str(SAMPLES / "kineto_gloo_2rank"), "--store", str(other), "--run", "b")
    assert Store(other).query("SELECT count(DISTINCT run) AS n FROM slices")["n"].iloc[0] == before + 1


def test_idle_view_sets_are_bounded_by_the_files_they_bind(kineto_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read database keeps idle view sets while they bind at most ``_VIEW_FILES`` Parquet files
    (DuckDB holds memory per bound file: a set over every rank of a big run is dropped first when
    idle), least recently used first; a set in use is never dropped, and one dropped is bound again."""
    from analyzer.store import store as store_module

    store = Store(kineto_store)
    store_module._READ_DBS.clear()
    whole = {}
    for r in (0, 1, None):
        with store.read_connection(ranks=None if r is None else [r], tables=["slices", "operators"]) as con:
            whole[r] = con.execute("SELECT count(*) FROM slices").fetchone()[0]
    (db,) = store_module._READ_DBS.values()
    files = {v[1]: db.files[s] for v, s in db.schemas.items()}
    assert files == {(0,): 2, (1,): 2, None: 4}  # one file per table and rank
    monkeypatch.setattr(store_module, "_VIEW_FILES", 3)

    def sets() -> set[tuple[Any, ...]]:
        return {(v[1], v[2]) for v in db.schemas}

    pair = ("operators", "slices")
    with store.read_connection(ranks=None, tables=list(pair)) as held:  # in use: kept
        with store.read_connection(ranks=[0], tables=["kernels"]):  # a new set: the idle ones weighed
            pass
        assert held.execute("SELECT count(*) FROM slices").fetchone()[0] == whole[None]
        # idle: rank 0's and rank 1's sets, 4 files: the least recently used (rank 0's) dropped
        assert sets() == {((1,), pair), (None, pair), ((0,), ("kernels",))}
    with store.read_connection(ranks=[1], tables=["comm_ops"]):  # the whole-run set idle now: dropped
        assert (None, pair) not in sets() and ((1,), ("comm_ops",)) in sets()
        assert sum(db.files[s] for s in db.schemas.values() if not db.in_use.get(s)) <= 3
    with store.read_connection(tables=["slices", "operators"]) as con:  # bound again
        assert con.execute("SELECT count(*) FROM slices").fetchone()[0] == whole[None] == whole[0] + whole[1]
    store_module._READ_DBS.clear()


def test_summary_reads_in_80_columns(kineto_store: Path) -> None:
    """Every line of `analyze summary` fits an 80-column terminal, and no number is cut short."""
    out = analyze("summary", "--store", str(kineto_store), env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert lines and max(len(ln) for ln in lines) <= 80, max(lines, key=len)
    assert "…" not in out
    s = json.loads(analyze("summary", "--json", "--store", str(kineto_store)).stdout)
    for r in s["ranks"]:  # each rank's step time and top operator are printed whole
        assert fmt_ns(r["step_avg_ns"]) in out and r["top_operators"][0]["name"] in out


def test_result_cache_is_bounded_in_bytes_as_well_as_entries() -> None:
    """A whole run's values grow with its ranks: the cache drops the least recently used values
    once their estimated bytes pass its budget (the newest stays, however large)."""
    import numpy as np
    import pandas as pd

    from analyzer.store import ResultCache, nbytes

    frame = pd.DataFrame({"rank": np.arange(5000), "name": [f"op{i % 97}" for i in range(5000)]})
    assert nbytes(frame) == pytest.approx(frame.memory_usage(index=True, deep=True).sum(), rel=0.05)
    assert nbytes((np.zeros(1000), {"a": np.zeros(500)})) >= 12_000
    cache = ResultCache(size=100, budget=3 * 80_000)
    for k in range(5):
        cache.get(k, lambda: np.zeros(10_000))  # 80 kB each
    assert len(cache) == 3 and cache.nbytes == 3 * 80_000
    assert cache.get(0, lambda: "computed again") == "computed again"  # the oldest went first
    cache.get("big", lambda: np.zeros(100_000))
    assert len(cache) == 1 and cache.nbytes == 800_000
    counted = ResultCache(size=2)  # no budget: bounded by the count alone
    for k in range(3):
        counted.get(k, lambda: np.zeros(100_000))
    assert len(counted) == 2


def test_ingest_says_how_many_analyses_it_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed ingest report names the whole-run analyses it stored (a re-ingest after an upgrade
    computes again those another version of their code stored: the way to refresh a store)."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from analyzer import cli

    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=200))
    plan = SimpleNamespace(rank=0, rel_root="rank_0")
    report = SimpleNamespace(
        run="job", read=[], unchanged=[plan], problems=[], ignored=[], seconds=1.5, stored_analyses=0
    )
    cli._print_done(report)
    assert "analyses" not in out.getvalue()
    report.stored_analyses, report.stored_seconds = 12, 3.25
    cli._print_done(report)
    assert "12 analyses of the whole run stored with it (3.2 s of that)" in out.getvalue()
    assert (
        cli._report_json(
            SimpleNamespace(**{**vars(report), "root": "r", "store": "s", "kept_previous": [], "gone": []})
        )["stored_analyses"]
        == 12
    )
