"""`analyze report`, `summary` and the web app whatever times the store holds: rows with a missing
timestamp, an overflowed one (9.5e15 µs wrapped around BIGINT), a time after 2100 or a negative
duration (what an earlier version stored; the ingest now keeps them out) are left out of every
analysis and counted in the report; the results of the other rows stay exactly what they were;
`analyze query` still shows every row.

The bad rows are written straight into the store (FactWriter + Store.commit, the ingest's own
path) with the writer's time check off, as an earlier version wrote them, so the test holds
whatever the readers come to accept or refuse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from helpers import REPO
from webapp_helpers import DashClient

from analyzer import factwriter
from analyzer.analyses import step_breakdown
from analyzer.analyses.report import build_report
from analyzer.cli import main
from analyzer.factwriter import FactWriter
from analyzer.store import Store, utcnow

KINETO = REPO / "sample_data" / "kineto_gloo_2rank"
WRAPPED = -7_155_887_047_709_551_616  # 9.5e15 µs as an ingest that overflowed stored it
HUGE_DUR = 8_946_744_073_709_551_616  # -9.5e15 µs, likewise
BEYOND = 2**62 + 1


def bad_rows(store: Store, run: str) -> dict[str, pa.Table]:
    """Copies of real rows of rank 0 with one broken time each, per table."""
    out = {}
    with store.read_connection(run=run, ranks=[0], usable_only=False) as con:
        for table in ("steps", "slices", "operators", "comm_ops", "memory_samples"):
            row = con.sql(f'SELECT * FROM "{table}" LIMIT 1').to_arrow_table().to_pylist()[0]
            rows = []
            if table == "steps":
                rows += [{**row, "end_ns": row["start_ns"] - 1, "dur_ns": -1}, {**row, "end_ns": WRAPPED}]
            else:
                rows += [{**row, "ts_ns": WRAPPED}, {**row, "ts_ns": BEYOND}]
                if "dur_ns" in row:
                    rows += [{**row, "dur_ns": -5}, {**row, "dur_ns": HUGE_DUR}]
            for r in rows:
                for k in ("run", "rank", "collection_id"):
                    r.pop(k)
            out[table] = pa.Table.from_pylist(rows)
    return out


def null_rows(store: Store, run: str) -> dict[str, pa.Table]:
    """Copies of real rows of rank 0 without their time (NULL is a stored time's "not given": an
    operator of an export without timestamps): kept, and nothing may crash on them."""
    out = {}
    with store.read_connection(run=run, ranks=[0], usable_only=False) as con:
        for table, col in (("steps", "start_ns"), ("slices", "ts_ns"), ("operators", "ts_ns"), ("comm_ops", "ts_ns")):
            row = con.sql(f'SELECT * FROM "{table}" LIMIT 1').to_arrow_table().to_pylist()[0]
            r = {k: v for k, v in row.items() if k not in ("run", "rank", "collection_id")}
            out[table] = pa.Table.from_pylist([{**r, col: None}])
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> tuple[Store, Store, dict[str, int]]:
    """(the sample's store, the same plus a collection of rank 0 holding only broken rows, the counts)."""
    tmp = tmp_path_factory.mktemp("badtimes")
    clean, bad = (Store(ingested(tmp / name, (KINETO, "k"))) for name in ("clean", "bad"))
    rows = bad_rows(bad, "k")
    w = FactWriter(bad.path, "k", 0, "broken")
    with pytest.MonkeyPatch.context() as mp:  # the writer of an earlier version: no time check
        mp.setattr(factwriter, "time_problems", lambda *a, **k: (None, []))
        for table, tbl in rows.items():
            w.write(table, tbl)
    fact_files = w.close()
    col = bad.query("SELECT * FROM collections WHERE rank = 0 LIMIT 1").to_dict("records")[0]
    col.update(collection_id="broken", root_path="broken", n_rows=w.total_rows, ingested_at=utcnow())
    col = {k: (list(v) if hasattr(v, "tolist") and not isinstance(v, str) else v) for k, v in col.items()}
    bad.commit("k", str(KINETO.resolve()), [], [col], fact_files, [])
    return clean, bad, {t: tbl.num_rows for t, tbl in rows.items()}


def test_report_leaves_the_broken_rows_out_and_says_so(stores: tuple[Store, Store, dict[str, int]]) -> None:
    clean, bad, counts = stores
    assert bad.unusable_rows("k") == counts and clean.unusable_rows("k") == {}
    res = CliRunner().invoke(main, ["report", "--run", "k", "--store", str(bad.path)])
    assert res.exit_code == 0, res.output
    assert "left out of every analysis" in res.output and f"{counts['slices']} slices row(s)" in res.output
    res = CliRunner().invoke(main, ["report", "--run", "k", "--json", "--store", str(bad.path)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["unusable_rows"] == counts
    # the good rows give the results they gave without the broken ones
    pd.testing.assert_frame_equal(step_breakdown(bad, "k"), step_breakdown(clean, "k"))
    got, want = build_report(bad, "k"), build_report(clean, "k")
    for section in ("communication", "slow_rank", "clock_offsets"):
        if isinstance(want.get(section), pd.DataFrame):
            pd.testing.assert_frame_equal(got[section], want[section], obj=section)


def test_summary_and_query_with_broken_rows(stores: tuple[Store, Store, dict[str, int]]) -> None:
    _, bad, counts = stores
    res = CliRunner().invoke(main, ["summary", "--run", "k", "--store", str(bad.path)])
    assert res.exit_code == 0, res.output
    # analyze query shows every row as stored
    res = CliRunner().invoke(
        main,
        [
            "query",
            "SELECT count(*) AS n FROM slices WHERE collection_id = 'broken'",
            "--format",
            "json",
            "--store",
            str(bad.path),
        ],
    )
    assert res.exit_code == 0 and json.loads(res.output) == [{"n": counts["slices"]}], res.output


def test_the_web_app_with_broken_rows(stores: tuple[Store, Store, dict[str, int]]) -> None:
    from webapp import create_app

    _, bad, _ = stores
    client = DashClient(create_app(bad))
    for path in ("/", "/timeline", "/operators", "/memory", "/communication"):
        page = client.page(path, "?run=k")
        assert "Internal error" not in page and "msg-error" not in page, (path, page[:500])
    meta = client.http.get("/_timeline/meta?run=k&ranks=0")
    assert meta.status_code == 200, meta.get_data(as_text=True)[:500]


def test_rows_are_checked_by_time_only(stores: tuple[Store, Store, dict[str, int]]) -> None:
    """A clean sample loses nothing: every row of it is usable."""
    clean, _, _ = stores
    with clean.read_connection(run="k", usable_only=False) as raw, clean.read_connection(run="k") as used:
        for t in ("steps", "slices", "operators", "kernels", "comm_ops", "memory_samples", "operator_memory"):
            q = f'SELECT count(*) FROM "{t}"'
            assert raw.execute(q).fetchone() == used.execute(q).fetchone(), t


def test_rows_without_a_time_are_kept_and_nothing_crashes(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["ingest", str(KINETO), "--run", "k", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    store = Store(tmp_path / "s")
    rows = null_rows(store, "k")
    w = FactWriter(store.path, "k", 0, "untimed")
    for table, tbl in rows.items():
        w.write(table, tbl)
    fact_files = w.close()
    col = store.query("SELECT * FROM collections WHERE rank = 0 LIMIT 1").to_dict("records")[0]
    col.update(collection_id="untimed", root_path="untimed", n_rows=w.total_rows, ingested_at=utcnow())
    col = {k: (list(v) if hasattr(v, "tolist") and not isinstance(v, str) else v) for k, v in col.items()}
    store.commit("k", str(KINETO.resolve()), [], [col], fact_files, [])
    assert store.unusable_rows("k") == {}
    for cmd in (["report"], ["report", "--json"], ["summary"]):
        res = CliRunner().invoke(main, [*cmd, "--run", "k", "--store", str(store.path)])
        assert res.exit_code == 0, (cmd, res.output)
