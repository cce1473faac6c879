"""The pipeline view's analyses (``analyzer/analyses/pipeline.py``) on a real PP job, checked against
its raw traces: tests/data/kineto_gloo_4rank_slow (tests/data/make_slow_rank.py: PP2 x DP2 on gloo,
GPipe, two micro-batches per step, 6 profiled steps; stage 0 = ranks 0, 1; stage 1 = ranks 2, 3)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import traced_p2p

from analyzer.analyses import ANALYSES
from analyzer.analyses.pipeline import pipeline, pipeline_stages, send_recv_pairs
from analyzer.cli import main
from analyzer.store import Store

JOB = Path(__file__).resolve().parent / "data" / "kineto_gloo_4rank_slow"
DP_ONLY = Path(__file__).resolve().parent.parent / "sample_data" / "kineto_gloo_2rank"
MICRO_BATCHES = 2


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("pipeline") / "store"
    for folder, run in ((DP_ONLY, "dp"), (JOB, "pp")):
        res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(path)])
        assert res.exit_code == 0, res.output
    return Store(path)


def raw_p2p(rank: int) -> dict[int, list[dict[str, Any]]]:
    """Per step of the rank's raw trace: its sends and recvs in call order (helpers.traced_p2p);
    every rank posts 12 of each kind in the profiled steps."""
    with gzip.open(JOB / f"rank_{rank}" / f"rank{rank}.pt.trace.json.gz") as f:
        out = traced_p2p(json.load(f))
    for kind in ("send", "recv"):
        assert sum(o["kind"] == kind for ops in out.values() for o in ops) == 12, (rank, kind)
    return out


def union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for a, b in sorted(intervals):
        if reach is None or a >= reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def close(a: int, b: int, terms: int = 1) -> bool:
    return abs(int(a) - int(b)) <= 2 * terms  # µs floats of the trace, each time rounded to ns on both sides


def test_every_send_pairs_with_its_recv_on_the_other_stage(store: Store) -> None:
    pairs = send_recv_pairs(store, "pp")
    assert len(pairs) == 48  # 4 ranks x 6 steps x 2 micro-batches sent
    by = pairs.groupby(["src_rank", "dst_rank", "direction"]).size().to_dict()
    assert by == {(0, 2, "forward"): 12, (1, 3, "forward"): 12, (2, 0, "backward"): 12, (3, 1, "backward"): 12}
    raw = {r: raw_p2p(r) for r in range(4)}
    for p in pairs.itertuples():
        sends = [o for o in raw[p.src_rank][p.step] if o["kind"] == "send"]
        recvs = [o for o in raw[p.dst_rank][p.step] if o["kind"] == "recv"]
        k = [close(o["end"], p.send_end_ns) for o in sends].index(True)
        assert close(recvs[k]["end"], p.recv_end_ns), (p, k)  # the k-th send is the peer's k-th recv


def test_stages_micro_batches_and_bubbles_match_the_raw_trace(store: Store) -> None:
    st = pipeline_stages(store, "pp")
    assert sorted(st["rank"].unique()) == [0, 1, 2, 3]
    assert (st["n_stages"] == 2).all() and len(st) == 4 * 6
    assert dict(zip(st["rank"], st["stage"])) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert (st["forward_micro_batches"] == MICRO_BATCHES).all()
    assert (st["backward_micro_batches"] == MICRO_BATCHES).all()
    for r in range(4):
        raw = raw_p2p(r)
        for row in st[st["rank"] == r].itertuples():
            blocked = [(o["call"], o["end"]) for o in raw[int(row.step)]]
            assert close(row.bubble_ns, union(blocked), len(blocked)), (r, row.step)
            assert 0 < row.bubble_pct < 100
    seg = pipeline(store, "pp")
    # stage 0 (GPipe): forward 1 is the work between the end of activation send 0 and the call of send 1
    raw0 = raw_p2p(0)
    for step, ops in raw0.items():
        sends = [o for o in ops if o["kind"] == "send"]
        f1 = seg[(seg["rank"] == 0) & (seg["step"] == step) & (seg["kind"] == "forward") & (seg["micro_batch"] == 1)]
        assert len(f1) == 1
        assert close(f1["end_ns"].iloc[0], sends[1]["call"])
        assert close(f1["start_ns"].iloc[0], max(sends[0]["end"], sends[0]["call"]))
    # the last stage: forward 0 runs from the end of activation recv 0 to the call of recv 1
    raw2 = raw_p2p(2)
    for step, ops in raw2.items():
        recvs = [o for o in ops if o["kind"] == "recv"]
        f0 = seg[(seg["rank"] == 2) & (seg["step"] == step) & (seg["kind"] == "forward") & (seg["micro_batch"] == 0)]
        assert len(f0) == 1 and close(f0["start_ns"].iloc[0], recvs[0]["end"])
        assert close(f0["end_ns"].iloc[0], recvs[1]["call"])
    # segments never overlap within a rank's step; bubbles name the peer stage's rank
    for (_, _), g in seg.groupby(["rank", "step"]):
        g = g.sort_values("start_ns")
        assert (g["start_ns"].iloc[1:].to_numpy() >= g["end_ns"].iloc[:-1].to_numpy()).all()
    bub = seg[seg["kind"] == "bubble"]
    assert (bub["peer"].astype(int) == bub["rank"].map({0: 2, 1: 3, 2: 0, 3: 1})).all()


def test_a_job_without_p2p_has_no_pipeline(store: Store) -> None:
    for name in ("send_recv_pairs", "pipeline", "pipeline_stages"):
        assert ANALYSES[name].compute(store, "dp").empty


def test_pipeline_page_from_its_address(store: Store) -> None:
    """The page's layout restores run, step and group from the address (a wrong one is a note), its
    callback draws the step's segments and writes the view back; a run without pipeline says so."""
    from webapp_helpers import DashClient, props_of, texts

    from webapp import create_app

    client = DashClient(create_app(store.path))
    page = client.page("/pipeline", "?run=pp&step=5&group=1")
    assert '"value": 5' in page and '"value": 1' in page and "msg-error" not in page
    bad = client.page("/pipeline", "?run=pp&step=99&group=7")
    assert "step=99: the pipeline has steps 2" in bad and "group=7: the run has pipeline groups 0" in bad
    out = client.call("pp-content.children", {"pp-run.value": "pp", "pp-step.value": 5, "pp-group.value": 1})
    assert out["view-url"]["data"] == "/pipeline?run=pp&step=5&group=1"
    body = texts(out["pp-content"]["children"])
    st = pipeline_stages(store, "pp")
    mine = st[(st["pp_group"] == 1) & (st["step"] == 5)]
    assert f"the stages spend {mine['bubble_pct'].mean():.1f} % of the pipeline phase in bubbles" in " ".join(body)
    chart = next(c for c in props_of(out["pp-content"]["children"]) if c.get("id") == "pp-chart")
    bars = {d["name"]: d for d in chart["figure"]["data"]}
    seg = pipeline(store, "pp")
    here = seg[(seg["pp_group"] == 1) & (seg["step"] == 5)]
    assert len(bars["backward"]["customdata"]) == (here["kind"] == "backward").sum()
    none = client.call("pp-content.children", {"pp-run.value": "dp", "pp-step.value": None, "pp-group.value": None})
    assert any(t.startswith("No pipeline found in this run") for t in texts(none["pp-content"]["children"]))


def test_the_text_report_summarises_each_stage(store: Store) -> None:
    res = CliRunner().invoke(main, ["report", "--run", "pp", "--store", str(store.path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Pipeline from send/recv pairing (mean per step; ms)" in res.output
    st = pipeline_stages(store, "pp")
    mean = st[st["rank"] == 3]["bubble_pct"].mean()
    line = next(x for x in res.output.splitlines() if x.replace(" ", "").startswith("│1│1│3│"))
    assert f"{mean:.1f}" in line and "2.0" in line
    res = CliRunner().invoke(main, ["report", "--run", "dp", "--store", str(store.path)], terminal_width=200)
    assert res.exit_code == 0 and "Pipeline from" not in res.output
