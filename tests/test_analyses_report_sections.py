"""`analyze report` prints and exports every analysis: communication matrix and bandwidth, HTA's
temporal breakdown, the layout grid, the evidence tables, and a sentence for what is empty."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.analyses import comm_bandwidth, comm_matrix, slow_rank_evidence, step_breakdown, temporal_breakdown
from analyzer.analyses.report import SECTIONS
from analyzer.cli import main
from analyzer.store import Store

DATA = Path(__file__).resolve().parent / "data"
REPO = DATA.parent.parent
GLOO_4RANK = DATA / "kineto_gloo_4rank_slow"
NPU_TEXT = REPO / "sample_data" / "torch_npu_text_level1"
RESNET_1RANK = DATA / "kineto_resnet50_old"


def ingest(folder: Path, store_dir: Path, run: str) -> Store:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store_dir)])
    assert res.exit_code == 0, res.output
    return Store(store_dir)


def report(store: Store, run: str, as_json: bool) -> str:
    res = CliRunner().invoke(
        main, ["report", "--run", run, "--store", str(store.path)] + (["--json"] if as_json else [])
    )
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def stores(tmp_path_factory, ingested) -> dict[str, Store]:
    root = tmp_path_factory.mktemp("report")
    one = root / "one_of_four"
    shutil.copytree(GLOO_4RANK / "rank_0", one / "rank_0")
    return {
        "gloo4": Store(ingested(root / "gloo4", (GLOO_4RANK, "gloo4"))),
        "npu": Store(ingested(root / "npu", (NPU_TEXT, "npu"))),
        "one": ingest(one, root / "one", "one"),
        "r50": ingest(RESNET_1RANK, root / "r50", "r50"),
    }


def test_json_has_every_section_with_real_values(stores):
    npu = stores["npu"]
    doc = json.loads(report(npu, "npu", True))
    assert set(SECTIONS) <= set(doc)
    # HTA temporal breakdown: one profiled step (50) per rank, so compute = Computing of that step
    tb = {r["rank"]: r for r in doc["temporal_breakdown"]}
    assert tb[0]["steps"] == [50] and tb[0]["compute_ns"] == pytest.approx(8_873_737, abs=1_000)
    assert tb[0]["kernel_ns"] == pytest.approx(136_581_009, abs=1_000)
    assert doc["temporal_breakdown"] == json.loads(temporal_breakdown(npu, "npu").to_json(orient="records"))
    # matrix: 16 links of the 8-card group seen from ranks 0 and 1, in global ranks where known
    assert len(doc["comm_matrix"]) == len(comm_matrix(npu, "npu")) == 16
    hccs = [m for m in doc["comm_matrix"] if m["transport"] == "HCCS" and m["src_rank"] == 0 and m["dst_rank"] == 1]
    # allreduce-total "0-1" in rank 0's communication_matrix.json: 61.210624 MB (decimal) in 3.883938 ms
    assert len(hccs) == 1 and hccs[0]["bytes"] == 61_210_624
    assert hccs[0]["bandwidth_bytes_per_s"] == pytest.approx(61_210_624 / 3.883938e-3, rel=1e-4)
    bw = comm_bandwidth(npu, "npu")
    assert len(doc["comm_bandwidth"]) == len(bw) == 16
    assert {r["transport"] for r in doc["comm_bandwidth"]} == {"HCCS", "SDMA"}
    assert sum(r["bytes"] for r in doc["comm_bandwidth"]) == int(bw["bytes"].sum())
    # layout grid: mean step time per rank
    sb = step_breakdown(npu, "npu")
    grid = {r["rank"]: r for r in doc["layout_metric"]}
    assert grid[0]["metric"] == "step_ns" and grid[0]["value"] == pytest.approx(sb[sb["rank"] == 0]["step_ns"].mean())
    assert grid[0]["value"] == pytest.approx(155_986_000, rel=1e-4)


def test_text_report_shows_evidence_matrix_and_layout_grid(stores):
    g = stores["gloo4"]
    text = report(g, "gloo4", False)
    for title in (
        "temporal breakdown (HTA): no device ranks",
        "Communication per rank, group and op",
        "Bandwidth per rank and transport",
        "Slow rank evidence",
        "Layout grid",
    ):
        assert title in text, title
    # every convicting collective is printed with its Dixon statistic
    for row in slow_rank_evidence(g, "gloo4").itertuples():
        assert f"dixon_q_99.5 {row.statistic:.3f} > 0.920" in text
    assert "0.949 > 0.920" in text
    # the grid: rank 1 is dp 1, pp 0 and its mean step time is printed
    sb = step_breakdown(g, "gloo4")
    mean1 = sb[sb["rank"] == 1]["step_ns"].mean() / 1e6
    assert re.search(rf"│ 1\s+│ 1\s+│ 0\s+│ {mean1:.3f}\s+│", text)
    npu_text = report(stores["npu"], "npu", False)
    assert "Communication matrix" in npu_text and "… 6 more, see --json" in npu_text
    assert "Temporal breakdown (ms, HTA's definition" in npu_text
    assert "fewer than 4 profiled members, too few for Dixon's test" in npu_text


def test_text_report_says_what_is_missing(stores):
    r50 = report(stores["r50"], "r50", False)
    assert "communication: none recorded in this run" in r50
    assert "clock offsets: a single rank, nothing to align" in r50
    one = report(stores["one"], "one", False)
    assert "group 0 (default_pg): only 1 of 4 members profiled (rank 0)" in one
    assert "slow rank: no collective seen by ≥ 2 profiled members of its group; judged 0" in one
    doc = json.loads(report(stores["one"], "one", True))
    cov = {c["group_name"]: c for c in doc["group_coverage"]}
    assert cov["0"]["ranks"] == [0, 1, 2, 3] and cov["0"]["ranks_profiled"] == [0]
    assert doc["slow_link_evidence"] == []


def test_report_reads_one_view_set_and_gives_what_each_analysis_gives_alone(stores, monkeypatch):
    """`build_report` binds the run's fact views once and serves every analysis from them (whatever
    tables or ranks it asks for): one view set for the whole report, and its JSON is what the
    analyses give when each reads the view set of exactly what it asks for (as before), nothing
    cached from the first pass."""
    from analyzer.analyses import cache
    from analyzer.analyses.report import build_report, report_json
    from analyzer.store import store as store_module

    g = stores["gloo4"]
    made: list[object] = []
    create = store_module.Store._create_fact_views
    monkeypatch.setattr(
        store_module.Store, "_create_fact_views", lambda self, *a, **k: made.append(k) or create(self, *a, **k)
    )
    cache.RESULTS.clear()
    store_module._READ_DBS.clear()
    once = report_json(build_report(g, "gloo4"))
    assert len(made) == 1, made
    cache.RESULTS.clear()
    store_module._READ_DBS.clear()
    monkeypatch.setattr(store_module, "_bound_set", lambda db, views: views if views in db.schemas else None)
    made.clear()
    alone = report_json(build_report(g, "gloo4"))
    assert len(made) > 1, made  # the analyses' own view sets were bound
    assert json.loads(once) == json.loads(alone)
