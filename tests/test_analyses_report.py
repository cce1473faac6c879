"""Parallel layout, slow link, advisor and the `analyze report` command on real traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from helpers import communication_group_json

from analyzer.analyses import advise, parallel_dims, parallel_layout, slow_links, step_breakdown
from analyzer.analyses.parallel_layout import infer_layout, layout_metric
from analyzer.analyses.slow_link import judge_links, judge_rank_bandwidth
from analyzer.cli import main
from analyzer.errors import QueryError
from analyzer.store import Store

DATA = Path(__file__).resolve().parent / "data"
REPO = DATA.parent.parent
GLOO_4RANK = DATA / "kineto_gloo_4rank_slow"
NPU_TEXT = REPO / "sample_data" / "torch_npu_text_level1"
NPU_2023 = DATA / "torch_npu_text_2023"
LAYOUT = DATA / "parallel_layout"  # msprof-analyze communication_group.json, 8 ranks TP2 x DP2 x PP2 (+ old format)


def ingest(folder: Path, store_dir: Path, run: str) -> Store:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store_dir)])
    assert res.exit_code == 0, res.output
    return Store(store_dir)


@pytest.fixture(scope="module")
def gloo4(tmp_path_factory, ingested) -> Store:
    return Store(ingested(tmp_path_factory.mktemp("gloo4") / "store", (GLOO_4RANK, "gloo4")))


def test_layout_from_communication_group_json_declared_and_inferred():
    groups = communication_group_json(LAYOUT / "communication_group.json")
    dims, coords = infer_layout(groups, list(range(8)))
    d = dims.set_index("dim")
    assert list(d.index) == ["tp", "dp", "pp"]
    assert d.loc["tp", "members"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # ranks 0-3 carry their DP group under the composite name "dp_cp" (CP = 1)
    assert d.loc["dp", "members"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert d.loc["pp", "members"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert all(s.startswith("declared") for s in d["source"])
    c = coords.set_index("rank")
    assert (c.loc[5, "tp"], c.loc[5, "dp"], c.loc[5, "pp"]) == (1, 0, 1)
    # the same groups without their names: the structure gives the same layout (Megatron order)
    dims2, coords2 = infer_layout(groups.assign(label=None), list(range(8)))
    assert dims2.set_index("dim")["members"].to_dict() == d["members"].to_dict()
    assert all(s.startswith("inferred") for s in dims2["source"])
    assert coords2.equals(coords)
    # old format: only the world and single-rank groups, nothing to infer
    old_dims, _ = infer_layout(communication_group_json(LAYOUT / "communication_group_old.json"), list(range(8)))
    assert old_dims.empty


def test_layout_inferred_from_gloo_traffic(gloo4):
    """make_slow_rank.py: DP groups {0,1},{2,3} carry all-reduces; PP groups {0,2},{1,3} only send/recv."""
    d = parallel_dims(gloo4, "gloo4").set_index("dim")
    assert d.loc["dp", "members"] == [[0, 1], [2, 3]]
    assert d.loc["pp", "members"] == [[0, 2], [1, 3]]
    lay = parallel_layout(gloo4, "gloo4").set_index("rank")
    assert lay.loc[1, "pp"] == 0 and lay.loc[1, "dp"] == 1 and lay.loc[2, "pp"] == 1 and lay.loc[2, "dp"] == 0
    grid = layout_metric(gloo4, "gloo4", "free_ns").set_index("rank")
    sb = step_breakdown(gloo4, "gloo4")
    assert grid.loc[1, "value"] == pytest.approx(sb[sb["rank"] == 1]["free_ns"].mean())
    assert grid["value"].idxmax() == 1  # the sleeping rank idles most
    votes = layout_metric(gloo4, "gloo4", "slow_rank_votes").set_index("rank")["value"]
    assert votes.idxmax() == 1
    with pytest.raises(QueryError):
        layout_metric(gloo4, "gloo4", "no_such_metric")


def test_layout_with_communication_group_json_in_the_run_folder(tmp_path):
    root = tmp_path / "job"
    shutil.copytree(NPU_TEXT, root)
    (root / "cluster_analysis_output").mkdir()
    shutil.copy(LAYOUT / "communication_group.json", root / "cluster_analysis_output" / "communication_group.json")
    store = ingest(root, tmp_path / "store", "job")
    d = parallel_dims(store, "job").set_index("dim")
    assert d.loc["tp", "size"] == 2 and d.loc["pp", "size"] == 2 and d.loc["dp", "size"] == 2
    assert len(parallel_layout(store, "job")) == 8


def test_slow_link_judges():
    rows = pd.DataFrame(
        {
            "step": [1] * 4,
            "group_name": ["g"] * 4,
            "transport": ["RDMA"] * 4,
            "rank": [0, 1, 2, 3],
            "bytes": [64 << 20] * 4,
            "bandwidth_bytes_per_s": [20e9, 20.4e9, 19.8e9, 12e9],
        }
    )
    (j,) = judge_rank_bandwidth(rows)
    assert j["slow"] and j["slow_rank"] == 3 and j["fast_rank"] == 1
    assert j["gap_ratio"] == pytest.approx((20.4e9 - 12e9) / rows["bandwidth_bytes_per_s"].mean())
    (j,) = judge_rank_bandwidth(rows.assign(bandwidth_bytes_per_s=[20e9, 20.4e9, 19.8e9, 19.9e9]))
    assert not j["slow"] and j["slow_rank"] is None
    assert judge_rank_bandwidth(rows.assign(bytes=4)) == []  # latency-bound: not judged
    links = pd.DataFrame(
        {
            "group_name": ["g"] * 4,
            "op_type": ["allreduce"] * 4,
            "transport": ["HCCS"] * 4,
            "src_rank": [0, 0, 0, 0],
            "dst_rank": [1, 2, 3, 4],
            "src_local": [0] * 4,
            "dst_local": [1, 2, 3, 4],
            "bytes": [2 * (64 << 20)] * 4,
            "steps": [2] * 4,
            "bandwidth_bytes_per_s": [16e9, 16.2e9, 15.9e9, 14e9],
        }
    )
    (j,), bad = judge_links(links)
    assert j["slow"] and (j["slow_src"], j["slow_dst"]) == (0, 4)
    assert list(bad["dst_rank"]) == [4]
    # the rank level's floor: links moving less than 1 MiB per step are latency-bound, not judged
    assert judge_links(links.assign(bytes=2 * 96))[0] == []


def test_slow_links_on_npu_sample(tmp_path):
    """Per-rank HCCS bandwidth = Σ transit size / Σ transit time of communication.json; the two
    ranks differ by < 5 %: nothing is slow."""
    store = ingest(NPU_TEXT, tmp_path / "store", "npu")
    sl = slow_links(store, "npu")
    rank_level = sl[(sl["level"] == "rank") & (sl["transport"] == "HCCS")].iloc[0]
    bw = []
    for r in (0, 1):
        doc = json.loads(
            (NPU_TEXT / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text()
        )
        ops = [v for k, v in doc["step50"]["collective"].items() if k != "Total Op Info"]
        size = sum(o["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] for o in ops) * 1e6
        time = sum(o["Communication Bandwidth Info"]["HCCS"]["Transit Time(ms)"] for o in ops) / 1000
        bw.append(size / time)
    assert rank_level["min_bytes_per_s"] == pytest.approx(min(bw), rel=1e-4)
    assert rank_level["max_bytes_per_s"] == pytest.approx(max(bw), rel=1e-4)
    assert not sl["slow"].any()


def test_advisor_on_the_slow_gloo_job(gloo4):
    adv = advise(gloo4, "gloo4")
    # first the arrival order's straggler, with its cause (rank 1 sleeps 30 ms before the world all-reduce)
    first = adv.iloc[0]
    assert (first["rule"], first["ranks"], first["severity"]) == ("straggler", [1], "high")
    assert "Python code, a sleep" in first["title"] and first["evidence"]
    # msprof-analyze's vote beside it
    top = adv[adv["rule"] == "slow_rank"].iloc[0]
    assert top["ranks"] == [1] and top["severity"] == "high"
    assert top["evidence"] and all(
        min(e["elapsed_by_rank"], key=e["elapsed_by_rank"].get) == 1 for e in top["evidence"]
    )
    free = adv[(adv["rule"] == "high_free") & adv["ranks"].map(lambda r: r == [1])].iloc[0]
    sb = step_breakdown(gloo4, "gloo4")
    r1 = sb[sb["rank"] == 1]
    assert free["value"] == pytest.approx(r1["free_ns"].sum() / r1["step_ns"].sum())
    # the text gives the means per step, as the report's step table does
    assert f"is {r1['free_ns'].mean() / 1e6:.3f} ms of {r1['step_ns'].mean() / 1e6:.3f} ms step time" in free["detail"]
    assert f"{free['value']:.1%}, threshold 10%" in free["detail"]
    gaps = free["evidence"]
    assert gaps == sorted(gaps, key=lambda g: -g["dur_ns"])
    # the biggest idle gap of rank 1 is its sleep (make_slow_rank.SLEEP_S = 30 ms)
    assert gaps[0]["dur_ns"] > 25_000_000
    assert set(adv["rule"]) <= {
        "straggler",
        "slow_rank",
        "slow_link",
        "high_free",
        "host_bound",
        "small_packets",
        "aicpu",
    }


def test_advisor_npu_rules(tmp_path):
    store = ingest(NPU_2023, tmp_path / "store", "npu23")
    adv = advise(store, "npu23")
    aicpu = adv[adv["rule"] == "aicpu"].iloc[0]
    # kernel_details.csv: two Cast tasks on AI_CPU, 72.1612 and 72.8611 µs
    assert sorted(e["max_ns"] for e in aicpu["evidence"]) == [72161, 72861]
    small = adv[(adv["rule"] == "small_packets") & adv["title"].str.contains("RDMA")].iloc[0]
    assert all(e["bytes"] < 1 << 20 for e in small["evidence"])
    store = ingest(NPU_TEXT, tmp_path / "store2", "npu")
    adv = advise(store, "npu")
    hb = adv[adv["rule"] == "host_bound"]
    assert {r for rs in hb["ranks"] for r in rs} == {0, 1}
    for ev in hb["evidence"]:
        for g in ev:
            assert g["launch_ns"] > g["start_ns"] and g["next_task"] == g["task_after"]


def test_analyze_report_cli(gloo4):
    store = str(gloo4.path)
    res = CliRunner().invoke(main, ["report", "--run", "gloo4", "--store", store, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["run"] == "gloo4"
    assert len(doc["step_breakdown"]) == 24 and {r["rank"] for r in doc["step_breakdown"]} == {0, 1, 2, 3}
    assert doc["slow_ranks"][0] == {**doc["slow_ranks"][0], "rank": 1}
    assert [a["rule"] for a in doc["advice"][:2]] == ["straggler", "slow_rank"]
    assert {d["dim"] for d in doc["parallel_dims"]} == {"dp", "pp"}
    assert [c["status"] for c in doc["clock_offsets"]] == ["reference", "aligned", "aligned", "aligned"]
    text = CliRunner().invoke(main, ["report", "--store", store])
    assert text.exit_code == 0, text.output
    assert "Rank 1 is the slow rank" in text.output and "Step breakdown" in text.output
    bad = CliRunner().invoke(main, ["report", "--run", "nope", "--store", store])
    assert bad.exit_code == 1 and "no run named 'nope'" in bad.output


def test_analyses_are_sql_tables_in_analyze_query(gloo4, tmp_path):
    """`analyze query` sees every analysis as analysis.<name>: the same rows as the Python function,
    joinable with the fact tables, over one run or every run (a run column first)."""
    store = str(gloo4.path)

    def query(sql: str, *extra: str) -> list[dict]:
        res = CliRunner().invoke(main, ["query", sql, "--store", store, "--format", "json", *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    rows = query("SELECT * FROM analysis.step_breakdown ORDER BY rank, step", "--run", "gloo4")
    expected = step_breakdown(gloo4, "gloo4")
    assert len(rows) == len(expected) == 24
    assert [r["run"] for r in rows] == ["gloo4"] * 24
    assert [r["computing_ns"] for r in rows] == [int(v) for v in expected["computing_ns"]]
    assert [r["free_ns"] for r in rows] == [int(v) for v in expected["free_ns"]]
    # joined with a fact table: the convicted rank with its kernel count from the same store
    (top,) = query(
        "SELECT v.rank, v.votes, k.n FROM analysis.slow_ranks v JOIN "
        "(SELECT rank, count(*) AS n FROM slices GROUP BY rank) k USING (rank) ORDER BY v.votes DESC LIMIT 1"
    )
    assert top["rank"] == 1 and top["votes"] > 0 and top["n"] > 0
    # list and nested columns survive (the advisor's evidence, the layout's members)
    adv = query("SELECT rule, ranks, evidence FROM analysis.advice")
    assert adv[0]["rule"] == "straggler" and adv[0]["ranks"] == [1] and adv[0]["evidence"]
    assert {r["dim"] for r in query("SELECT dim FROM analysis.parallel_dims")} == {"dp", "pp"}
    # every run when --run is not given (a copy of the store, the module's store stays one run)
    store = str(shutil.copytree(gloo4.path, tmp_path / "two_runs"))
    ingest(REPO / "sample_data" / "kineto_gloo_2rank", Path(store), "g2")
    per_run = query('SELECT run, count(*) AS n FROM analysis."step_breakdown" GROUP BY run ORDER BY run')
    assert per_run == [{"run": "g2", "n": 4}, {"run": "gloo4", "n": 24}]
    # a table the analyses do not have is named in the error
    bad = CliRunner().invoke(main, ["query", "SELECT * FROM analysis.nope", "--store", store])
    assert bad.exit_code == 1 and "no analysis table analysis.nope" in bad.output
    # the same words inside a string literal are text, not a table
    assert query("SELECT 'analysis.nope' AS x") == [{"x": "analysis.nope"}]
    schema_out = CliRunner().invoke(main, ["schema"]).output
    assert "analysis.slow_rank_evidence" in schema_out


def test_layout_pure_data_parallel_gloo(tmp_path):
    """sample_data/kineto_gloo_2rank: DDP on 2 ranks, only default_pg all-reduces: DP = 2. The
    torch_npu sample's group (2 of 8 cards, members known only from the reporting ranks) stays
    without a dimension."""
    store = ingest(REPO / "sample_data" / "kineto_gloo_2rank", tmp_path / "g2", "g2")
    d = parallel_dims(store, "g2")
    assert list(d["dim"]) == ["dp"] and d.iloc[0]["size"] == 2 and d.iloc[0]["members"] == [[0, 1]]
    lay = parallel_layout(store, "g2").set_index("rank")
    assert lay.loc[0, "dp"] == 0 and lay.loc[1, "dp"] == 1
    npu = ingest(NPU_TEXT, tmp_path / "npu", "npu")
    assert parallel_dims(npu, "npu").empty


def test_slow_link_findings_merge_transports_and_keep_a_decimal():
    """torch_npu reports one transfer as HCCS and as SDMA with the same numbers: one finding, not two;
    a 5.44 % gap against the 5 % threshold reads 5.4 %, not "5%"."""
    from analyzer.analyses.advisor import slow_link_findings
    from analyzer.analyses.slow_link import COLUMNS, EVIDENCE_COLUMNS

    base = pd.DataFrame(
        {
            "step": [1] * 4,
            "group_name": ["g"] * 4,
            "rank": [0, 1, 2, 3],
            "bytes": [64 << 20] * 4,
            "bandwidth_bytes_per_s": [20e9, 20.4e9, 19.8e9, 12e9],
        }
    )
    rows = pd.concat([base.assign(transport="HCCS"), base.assign(transport="SDMA")], ignore_index=True)
    judged = pd.DataFrame(judge_rank_bandwidth(rows), columns=COLUMNS)
    assert len(judged) == 2 and judged["slow"].all()
    ev = pd.DataFrame(
        [
            {
                "rank": 3,
                "step": 1,
                "op_name": "hcom_allReduce__1",
                "group_name": "g",
                "transport": t,
                "bytes": 64 << 20,
                "transit_ns": 5_592_405,
                "bandwidth_bytes_per_s": 12e9,
                "level": "rank",
                "reason": "lowest",
            }
            for t in ("HCCS", "SDMA")
        ],
        columns=EVIDENCE_COLUMNS,
    )
    (f,) = slow_link_findings(judged, ev)
    assert f["title"] == "Rank 3 is slow on HCCS/SDMA" and f["ranks"] == [3]
    assert sorted(e["transport"] for e in f["evidence"]) == ["HCCS", "SDMA"]
    gap = (20.4e9 - 12e9) / base["bandwidth_bytes_per_s"].mean()
    assert f"gap {gap:.1%} of the mean" in f["detail"]
    # a gap just above the threshold keeps its decimal
    j2 = pd.DataFrame(
        judge_rank_bandwidth(base.assign(transport="RDMA", bandwidth_bytes_per_s=[20e9, 20e9, 20e9, 18.94e9])),
        columns=COLUMNS,
    )
    (f2,) = slow_link_findings(j2, pd.DataFrame(columns=EVIDENCE_COLUMNS))
    assert "gap 5.4% of the mean, threshold 5%" in f2["detail"]
    assert slow_link_findings(j2.iloc[0:0], pd.DataFrame(columns=EVIDENCE_COLUMNS)) == []
    assert slow_link_findings(pd.DataFrame(columns=COLUMNS), pd.DataFrame(columns=EVIDENCE_COLUMNS)) == []
