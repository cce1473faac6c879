"""The one registry of analyses (``analyzer.analyses.ANALYSES``): documented, iterated by the report,
the ``analysis.*`` tables and the web warm-up; each analysis computed once per content of its run;
one ``resolve_run`` for every caller."""

from __future__ import annotations

import importlib
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from analyzer.analyses import (
    ANALYSES,
    COMPARISONS,
    STORED_AT_INGEST,
    activity,
    comm_per_rank,
    communication_summary,
    step_breakdown,
)
from analyzer.analyses.cache import RESULTS
from analyzer.analyses.report import SECTIONS, build_report
from analyzer.analyses.views import SCHEMA, referenced
from analyzer.cli import main
from analyzer.errors import NoRunsError, UnknownRunError
from analyzer.store import Store, resolve_run, run_key

REPO = Path(__file__).resolve().parent.parent
KINETO = REPO / "sample_data" / "kineto_gloo_2rank"


def ingest(folder: Path, store_dir: Path, run: str) -> Store:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store_dir)])
    assert res.exit_code == 0, res.output
    return Store(store_dir)


@pytest.fixture(scope="module")
def gloo(tmp_path_factory: pytest.TempPathFactory, ingested: Any) -> Store:
    return Store(ingested(tmp_path_factory.mktemp("registry") / "store", (KINETO, "gloo")))


def test_every_registered_analysis_is_documented() -> None:
    doc = (REPO / "docs" / "analyses.md").read_text()
    named = set(re.findall(r"`([a-z_]+)`", doc))
    missing = [name for name in (*ANALYSES, *COMPARISONS) if name not in named]
    assert not missing, f"docs/analyses.md does not name {missing}"
    for a in (*ANALYSES.values(), *COMPARISONS.values()):
        assert a.doc.strip() and "\n" not in a.doc, a.name
    assert not set(ANALYSES) & set(COMPARISONS)


def test_the_report_the_tables_and_the_warm_up_iterate_the_registry() -> None:
    assert tuple(ANALYSES) == SECTIONS
    for name in ANALYSES:
        assert referenced(f"SELECT * FROM {SCHEMA}.{name}") == [name]
    from webapp.warmup import _jobs

    assert [name for name, _ in _jobs("r", [0]) if name in ANALYSES] == list(ANALYSES)
    # a run whose analyses the ingest stored: the warm-up reads those first, and computes nothing else
    stored = {fn.full_name for fn in STORED_AT_INGEST}
    jobs = [n for n, _ in _jobs("r", [0], stored=stored)]
    warmed = [n for n in jobs if n in ANALYSES]
    assert warmed and {ANALYSES[n].compute.full_name for n in warmed} == stored
    assert jobs[: len(warmed)] == warmed
    # stored by another version of their code (none served): computed after the timeline's first view
    jobs = [n for n, _ in _jobs("r", [0], stored=set())]
    stale = [n for n in jobs if n in ANALYSES]
    assert stale == warmed and jobs.index(stale[0]) > jobs.index("timeline page") > jobs.index("timeline lanes")
    schema_out = CliRunner().invoke(main, ["schema"]).output
    for name, a in (*ANALYSES.items(), *COMPARISONS.items()):
        assert f"{SCHEMA}.{name}" in schema_out and a.doc in schema_out
    for name in COMPARISONS:
        assert referenced(f"SELECT * FROM {SCHEMA}.{name}") == [name]


def test_every_analysis_computes_on_a_real_run(gloo: Store) -> None:
    report = build_report(gloo, "gloo")
    for name, a in ANALYSES.items():
        df = a.compute(gloo, "gloo")
        assert isinstance(df, pd.DataFrame), name
        assert df.equals(report[name]) or (df.empty and report[name].empty), name
    per_rank = report["comm_per_rank"].set_index("rank")
    ops = report["communication"]
    for r in (0, 1):
        assert per_rank.loc[r, "ops"] == (ops["rank"] == r).sum()
        assert per_rank.loc[r, "elapsed_ns"] == ops[ops["rank"] == r]["dur_ns"].sum()
    inst = report["collective_instances"]
    assert len(inst) == ops["instance"].nunique() and (inst["ranks"] == 2).all()


def test_results_are_kept_per_content_of_the_run(gloo: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = communication_summary(gloo, "gloo")
    a["rank"] = -1  # a caller's copy: the cached value is not touched
    b = communication_summary(gloo)  # None: the most recently ingested run
    assert (b["rank"] >= 0).all()
    loads: list[str] = []
    real_load = activity.load
    monkeypatch.setattr(activity, "load", lambda con, run, ranks=None: loads.append(run) or real_load(con, run, ranks))
    # the breakdown the ingest stored is read (not computed from the activity): counted the same way
    stored = importlib.import_module("analyzer.analyses.step_breakdown")
    real_read = stored.from_aggregates
    monkeypatch.setattr(
        stored, "from_aggregates", lambda st, run, ranks: loads.append(run) or real_read(st, run, ranks)
    )
    RESULTS.clear()
    first = step_breakdown(gloo, "gloo")
    again = step_breakdown(gloo, None, None)  # the same call once the run and the defaults are filled in
    assert loads == ["gloo"] and first.equals(again)

    # a run that gains a rank has new content: a new key, a new result
    folder = tmp_path / "profile"
    shutil.copytree(KINETO / "rank_0", folder / "rank_0")
    st = ingest(folder, tmp_path / "store", "one")
    key = run_key(st, "one")
    assert list(comm_per_rank(st, "one")["rank"]) == [0]
    shutil.copytree(KINETO / "rank_1", folder / "rank_1")
    ingest(folder, tmp_path / "store", "one")
    assert run_key(st, "one") != key
    assert list(comm_per_rank(st, "one")["rank"]) == [0, 1]


def test_one_resolve_run(gloo: Store, tmp_path: Path) -> None:
    assert resolve_run(gloo, None) == "gloo" and resolve_run(gloo, "gloo") == "gloo"
    with pytest.raises(UnknownRunError, match="no run named 'nope'; runs in the store: gloo"):
        resolve_run(gloo, "nope")
    with pytest.raises(UnknownRunError, match="no run named 'nope'"):
        step_breakdown(gloo, "nope")
    empty = Store(tmp_path / "empty")
    empty.initialize()
    with pytest.raises(NoRunsError, match="no runs yet"):
        resolve_run(empty, None)
