"""`analyze query` is read-only and bounded: every known way out of the lock-down, tried against the
real command (a process, and click's runner) and the library function the other front ends share
(``analyzer.analyses.views.query``), leaves the store and the host untouched.

The store is fingerprinted (every file's bytes) before and after; the host files a query tries to
read are real ones (/etc/passwd); the files it tries to write are looked for afterwards.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import ANALYZE, REPO, analyze

from analyzer.analyses.views import query
from analyzer.cli import main
from analyzer.errors import QueryError, QueryLimitError
from analyzer.store import Limits, Store

KINETO = REPO / "sample_data" / "kineto_gloo_2rank"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Path:
    return ingested(tmp_path_factory.mktemp("lockdown") / "store", (KINETO, "gloo"))


def fingerprint(store: Path) -> dict[str, str]:
    """Every file of the store by its bytes' digest (the lock file aside)."""
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name != ".ingest.lock"
    }


def a_fact_file(store: Path) -> Path:
    return sorted((store / "facts" / "slices").rglob("*.parquet"))[0]


def escapes(store: Path, out: Path) -> list[tuple[str, str]]:
    """(what it tries, SQL): each must fail, and change nothing."""
    fact = a_fact_file(store)
    catalog = store / "catalog.duckdb"
    return [
        ("destroy the catalog", f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{catalog}'"),
        ("overwrite a Parquet file", f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{fact}' (FORMAT parquet)"),
        (
            "overwrite it in place",
            f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{fact}' (FORMAT parquet, USE_TMP_FILE false)",
        ),
        ("write a host file", f"COPY (SELECT 1) TO '{out / 'copy.csv'}'"),
        ("write a host file, explained", f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{out / 'copy2.csv'}'"),
        ("write the file DuckDB allows for :memory:", "EXPLAIN ANALYZE COPY (SELECT 1) TO ':memory:' (FORMAT csv)"),
        ("change a setting", "EXPLAIN ANALYZE SET enable_external_access = true"),
        ("lift the limits", "EXPLAIN ANALYZE SET max_execution_time = 0"),
        ("unlock", "EXPLAIN ANALYZE RESET lock_configuration"),
        ("a pragma", "EXPLAIN ANALYZE PRAGMA threads = 8"),
        ("load an extension", "LOAD httpfs"),
        ("load an extension, explained", "EXPLAIN ANALYZE LOAD httpfs"),
        ("install an extension", "INSTALL httpfs"),
        ("attach a database", f"ATTACH '{out / 'x.duckdb'}'"),
        ("attach the catalog writable", f"ATTACH '{catalog}' AS c"),
        ("read a host file as text", "SELECT * FROM read_text('/etc/passwd')"),
        ("read a host file as CSV", "SELECT * FROM read_csv('/etc/passwd')"),
        ("list host files", "SELECT * FROM glob('/etc/**')"),
        ("list the store's files", f"SELECT * FROM glob('{store}/**')"),
        ("read the catalog's bytes", f"SELECT * FROM read_blob('{catalog}')"),
        ("read a URL", "SELECT * FROM read_parquet('https://example.com/x.parquet')"),
        ("create a table", "CREATE TABLE x AS SELECT 1"),
        ("create a table, explained", "EXPLAIN ANALYZE CREATE TABLE x AS SELECT 1"),
        ("insert", "INSERT INTO runs VALUES ('x', 'y', now(), now())"),
        ("insert, explained", "EXPLAIN ANALYZE INSERT INTO runs SELECT * FROM runs"),
        ("delete, explained", "EXPLAIN ANALYZE DELETE FROM runs"),
        ("drop a view, explained", "EXPLAIN ANALYZE DROP VIEW slices"),
        ("export, explained", f"EXPLAIN ANALYZE EXPORT DATABASE '{out / 'export'}'"),
        ("two statements", "SELECT 1; DROP TABLE runs"),
    ]


def test_every_escape_fails_in_the_library_function(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # a relative path (':memory:') would land here
    out = tmp_path / "out"
    out.mkdir()
    before = fingerprint(store)
    st = Store(store)
    for what, sql in escapes(store, out):
        with pytest.raises(QueryError) as err:
            query(st, sql)
        assert str(err.value).strip(), what
    assert fingerprint(store) == before
    assert list(out.iterdir()) == [] and list(tmp_path.iterdir()) == [out]
    # and the store still answers
    assert query(st, "SELECT count(*) AS n FROM slices").frame["n"][0] > 1000


def test_every_escape_fails_in_the_command(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    before = fingerprint(store)
    runner = CliRunner()
    for what, sql in escapes(store, out):
        res = runner.invoke(main, ["query", sql, "--store", str(store)])
        assert res.exit_code == 1, (what, res.output)
        assert res.output.startswith("error: ") and "Traceback" not in res.output, (what, res.output)
    assert fingerprint(store) == before
    assert list(out.iterdir()) == [] and list(tmp_path.iterdir()) == [out]


def test_the_store_destroying_query_of_the_issue_as_a_process(store: Path, tmp_path: Path):
    before = fingerprint(store)
    catalog = store / "catalog.duckdb"
    for sql, refusal in (
        (f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{catalog}'", "not allowed"),
        ("SELECT * FROM read_text('/etc/passwd')", "not allowed"),
        ("EXPLAIN ANALYZE SET threads = 1", "locked"),
    ):
        proc = subprocess.run(
            [*ANALYZE, "query", sql, "--store", str(store)], capture_output=True, text=True, cwd=tmp_path, timeout=300
        )
        assert proc.returncode == 1 and refusal in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert "root:" not in proc.stdout
    assert fingerprint(store) == before
    assert list(tmp_path.iterdir()) == []


def test_what_stays_allowed(store: Path) -> None:
    st = Store(store)
    settings = query(
        st, "SELECT current_setting('enable_external_access') AS ext, current_setting('lock_configuration') AS locked"
    ).frame
    assert settings.to_dict("records") == [{"ext": False, "locked": True}]
    plan = query(st, "EXPLAIN SELECT rank, count(*) FROM slices GROUP BY rank").frame
    assert "physical_plan" in set(plan["explain_key"])
    analysed = query(st, "EXPLAIN ANALYZE SELECT count(*) FROM kernels").frame
    assert "analyzed_plan" in set(analysed["explain_key"])
    # the analyses are computed before the lock-down and read under it
    steps = query(st, "SELECT run, count(*) AS n FROM analysis.step_breakdown GROUP BY run").frame
    assert steps.to_dict("records") == [{"run": "gloo", "n": 4}]
    joined = query(
        st,
        "SELECT s.rank, count(*) AS n FROM slices s JOIN analysis.step_breakdown b USING (rank) GROUP BY 1 ORDER BY 1",
        run="gloo",
    ).frame
    assert list(joined["rank"]) == [0, 1] and (joined["n"] > 0).all()
    # parameters reach the query
    got = st.query("SELECT count(*) AS n FROM slices WHERE rank = ?", [1])["n"][0]
    assert got == query(st, "SELECT count(*) AS n FROM slices WHERE rank = 1").frame["n"][0] > 0


def test_a_runaway_query_hits_the_time_limit(store: Path) -> None:
    st = Store(store)
    t = time.monotonic()
    with pytest.raises(QueryLimitError, match="time limit of 1 s"):
        query(st, "SELECT count(*) FROM slices a, slices b, slices c, slices d", limits=Limits(seconds=1))
    with pytest.raises(QueryLimitError, match="time limit of 1 s"):
        query(st, "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b", limits=Limits(seconds=1))
    assert time.monotonic() - t < 120  # stopped, not run to the end (that would take days)
    res = analyze(
        "query",
        "SELECT count(*) FROM range(1000000000000000) a",
        "--time-limit",
        "1",
        "--store",
        str(store),
        check=False,
    )
    assert res.returncode == 1 and "time limit of 1 s" in res.stderr, res.stderr


def test_a_huge_result_hits_the_row_limit(store: Path) -> None:
    st = Store(store)
    res = query(st, "SELECT range AS i FROM range(50000000) ORDER BY i", limits=Limits(rows=1000))
    assert res.truncated and len(res.frame) == 1000 and list(res.frame["i"][:3]) == [0, 1, 2]
    small = query(st, "SELECT DISTINCT rank FROM collections", limits=Limits(rows=1000))
    assert not small.truncated and len(small.frame) == 2
    proc = analyze("query", "SELECT * FROM range(100000)", "--max-rows", "10", "--format", "csv", "--store", str(store))
    assert proc.stdout.splitlines() == ["range", *map(str, range(10))]
    assert "cut at 10 rows" in proc.stderr


def test_a_query_that_needs_too_much_memory_is_stopped(store: Path) -> None:
    with pytest.raises(QueryLimitError, match="memory limit of 100MB"):
        query(
            Store(store),
            "SELECT list(repeat('x', 1000) || range) FROM range(1000000)",
            limits=Limits(seconds=60, memory="100MB"),
        )


def test_store_query_shares_the_lock_down(store: Path, tmp_path: Path) -> None:
    """Store.query (the tests' and the library's convenience) runs under the same lock-down."""
    st = Store(store)
    with pytest.raises(QueryError, match="not allowed"):
        st.query("SELECT * FROM read_text('/etc/passwd')")
    with pytest.raises(QueryError):
        st.query(f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'")
    assert not (tmp_path / "x.csv").exists()
    assert os.path.exists(store / "catalog.duckdb")
