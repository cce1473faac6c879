"""Ranks whose files were copied only in part (issue 11 §1.2): users often copy only
``step_trace_time.csv`` and the communication files of some ranks, and big files get dropped. A
device rank without device tasks is not a CPU-only rank: its step row is the producer's own (said
so), or unknown; never zeros that read as an idle device, and no advice on what is missing. Real
files: the torch_npu Level1 text sample with rank 1 cut down as users do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.analyses import advise, step_breakdown, stragglers, temporal_breakdown
from analyzer.cli import main
from analyzer.store import Store

REPO = Path(__file__).resolve().parent.parent
NPU_TEXT = REPO / "sample_data" / "torch_npu_text_level1"
KEEP = {"step_trace_time.csv", "communication.json", "communication_matrix.json"}


def _cut(dst: Path, keep: set[str]) -> Path:
    shutil.copytree(NPU_TEXT, dst)
    out = dst / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    for p in out.iterdir():
        if p.name not in keep:
            p.unlink()
    return dst


def _ingest(folder: Path, store_dir: Path, run: str) -> Store:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store_dir)])
    assert res.exit_code == 0, res.output
    return Store(store_dir)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("partial")
    _ingest(_cut(root / "summaries", KEEP), root / "store", "summaries")
    return _ingest(_cut(root / "comm_only", KEEP - {"step_trace_time.csv"}), root / "store", "comm_only")


def test_a_rank_without_kernels_takes_the_producers_row(store: Store) -> None:
    sb = step_breakdown(store, "summaries").set_index("rank")
    with store.read_connection(run="summaries") as con:
        own = con.execute("SELECT * FROM step_trace WHERE run = 'summaries' AND rank = 1").df().iloc[0]
    r1 = sb.loc[1]
    assert r1["mode"] == "producer" and sb.loc[0, "mode"] == "device"
    for col in ("computing_ns", "communication_ns", "comm_not_overlapped_ns", "free_ns", "stage_ns", "preparing_ns"):
        assert int(r1[col]) == int(own[col]), col
    assert int(r1["computing_ns"]) == 8_878_295  # was 0 (taken for a CPU-only rank)
    # HTA's breakdown is of device tasks: the rank is left out, not shown with zero compute
    assert 1 not in set(temporal_breakdown(store, "summaries")["rank"])
    # the advice says where the figures come from, and makes nothing up
    adv = advise(store, "summaries")
    mine = adv[adv["ranks"].map(lambda r: 1 in r)]
    assert not mine["rule"].isin(["host_bound", "slow_rank"]).any(), mine[["rule", "title"]].to_string()
    free = mine[mine["rule"] == "high_free"]
    assert free.empty or "producer's own" in free["detail"].iloc[0]
    assert not adv["title"].str.contains("Computing differs").any()


def test_without_a_producer_row_the_columns_are_unknown_not_zero(store: Store) -> None:
    sb = step_breakdown(store, "comm_only").set_index("rank")
    r1 = sb.loc[[1]]
    assert (r1["mode"] == "no tasks").all()
    assert r1[["computing_ns", "free_ns", "communication_ns"]].isna().all().all()
    adv = advise(store, "comm_only")
    assert not adv["ranks"].map(lambda r: 1 in r).any(), adv[["rule", "title"]].to_string()


def test_report_says_which_rows_are_the_producers(store: Store) -> None:
    res = CliRunner().invoke(main, ["report", "--run", "summaries", "--store", str(store.path)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "rank(s) 1: the producer's own rows" in text
    assert "temporal breakdown: rank(s) 1 left out" in text
    res = CliRunner().invoke(main, ["report", "--run", "comm_only", "--store", str(store.path), "--json"])
    assert res.exit_code == 0, res.output  # the arrival analysis on a rank without steps (crashed before)
    doc = json.loads(res.output)
    assert {r["rank"] for r in doc["stragglers"]} == {0, 1}
    assert len(stragglers(store, "summaries")) == 2
