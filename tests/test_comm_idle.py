"""Issue 11 §1.9: the part of the communication groups' elapsed time that is neither wait nor
transit (msprof-analyze's Idle Time, ~93 % on the Level1 sample) is shown: an analysis column, the
report and the web app's communication page; and a MindSpore run is told in MindSpore's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from analyzer.analyses import comm_group_totals
from analyzer.cli import main
from analyzer.store import Store

REPO = Path(__file__).resolve().parent.parent
TEXT_L1 = REPO / "sample_data" / "torch_npu_text_level1"
MINDSPORE_CPU = REPO / "sample_data" / "mindspore_cpu_2rank"


def _ingest(folder: Path, store: Path, run: str) -> None:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store)])
    assert res.exit_code == 0, res.output


def _producer_idle(folder: Path) -> tuple[float, float]:
    """(idle, elapsed) ms summed over every op of every rank's communication.json, read with json."""
    idle = elapsed = 0.0
    for path in folder.glob("rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json"):
        for step in json.loads(path.read_text()).values():
            for kind in step.values():
                for op, info in kind.items():
                    if op == "Total Op Info":
                        continue
                    t = info["Communication Time Info"]
                    idle += t["Idle Time(ms)"]
                    elapsed += t["Elapse Time(ms)"]
    return idle, elapsed


def test_idle_time_of_communication_groups_is_shown(tmp_path: Path, ingested: Any) -> None:
    store = ingested(tmp_path / "store", (TEXT_L1, "npu"))
    cg = comm_group_totals(Store(store), "npu")
    assert len(cg) == 1
    g = cg.iloc[0]
    idle, elapsed = _producer_idle(TEXT_L1)
    assert abs(int(g["idle_ns"]) - idle * 1e6) <= 1_000 * 8  # the json's µs rounding, 8 ops
    assert abs(int(g["elapsed_ns"]) - elapsed * 1e6) <= 1_000 * 8
    assert g["idle_source"] == "producer"
    assert 0.93 < g["idle_ratio"] < 0.94  # 192.692 of 206.367 ms
    parts = int(g["idle_ns"]) + int(g["wait_ns"]) + int(g["transit_ns"])
    assert abs(parts - int(g["elapsed_ns"])) <= 1_000 * 8  # Idle = Elapse - Transit - Wait, each rounded
    res = CliRunner().invoke(main, ["report", "--run", "npu", "--store", str(store)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "idle %" in text and "93.4%" in text
    assert f"largest in group {g['group_name']}: 93.4% of its elapsed time" in text
    out = json.loads(CliRunner().invoke(main, ["report", "--run", "npu", "--json", "--store", str(store)]).output)
    assert out["communication_groups"][0]["idle_ns"] == int(g["idle_ns"])


def test_mindspore_run_is_told_in_its_own_words(tmp_path: Path) -> None:
    """A MindSpore CPU run: no Kineto wording; its wait/transit are estimated, so no idle is claimed."""
    store = tmp_path / "store"
    _ingest(MINDSPORE_CPU, store, "ms")
    cg = comm_group_totals(Store(store), "ms")
    assert cg["idle_ns"].isna().all() and cg["idle_source"].isna().all()
    res = CliRunner().invoke(main, ["report", "--run", "ms", "--store", str(store)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "kineto" not in text.lower(), text
    assert "communication matrix: no links recorded (MindSpore writes per-link data" in text
    # no step markers (no collector sidecar): 0 steps, as `summary` says, not 1
    assert "0 (whole trace)" in text and "over 1 step" not in text
    assert "over the whole trace (no step markers)" in text
    summary = CliRunner().invoke(main, ["summary", "--run", "ms", "--json", "--store", str(store)])
    assert {r["steps"] or 0 for r in json.loads(summary.output)["ranks"]} == {0}
