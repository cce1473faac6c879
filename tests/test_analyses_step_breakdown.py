"""Step breakdown: definitions checked against the raw trace files, torch_npu's own
step_trace_time.csv and HTA's temporal breakdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.analyses import step_breakdown
from analyzer.cli import main
from analyzer.store import Store

REPO = Path(__file__).resolve().parent.parent
GLOO_2RANK = REPO / "sample_data" / "kineto_gloo_2rank"

COMM_CALL_PREFIXES = ("c10d::", "gloo:", "nccl:")


def ingest(folder: Path, store_dir: Path, run: str) -> Store:
    res = CliRunner().invoke(main, ["ingest", str(folder), "--run", run, "--store", str(store_dir)])
    assert res.exit_code == 0, res.output
    return Store(store_dir)


def _merge(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _len(iv):
    return sum(e - s for s, e in iv)


def _inter(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def expected_cpu_breakdown(trace: Path) -> dict[int, dict[str, int]]:
    """The host-mode definitions, recomputed from the raw Kineto JSON with plain Python."""
    doc = json.loads(trace.read_text())
    base = int(doc.get("baseTimeNanoseconds", 0))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ns = lambda us: base + round(float(us) * 1000)  # noqa: E731
    steps = {}
    for e in ev:
        if e["name"].startswith("ProfilerStep#"):
            steps[int(e["name"].split("#")[1])] = (ns(e["ts"]), ns(e["ts"]) + round(float(e["dur"]) * 1000))

    def step_of(t):
        for k, (s, en) in steps.items():
            if s <= t < en:
                return k
        return None

    comp, comm = {k: [] for k in steps}, {k: [] for k in steps}
    for e in ev:
        t0 = ns(e["ts"])
        iv = (t0, t0 + round(float(e["dur"]) * 1000))
        k = step_of(t0)
        if k is None:
            continue
        name, cat = e["name"], e.get("cat")
        is_call = name.startswith(COMM_CALL_PREFIXES) or name == "record_param_comms"
        if cat == "cpu_op":
            (comm if is_call else comp)[k].append(iv)
        elif cat == "user_annotation" and name.startswith(("gloo:", "nccl:")):
            comm[k].append(iv)
    out = {}
    for k, (hs, he) in steps.items():
        c, m = _merge(comp[k]), _merge(comm[k])
        busy = _merge(c + m)
        first, last = busy[0][0], busy[-1][1]
        ov = _len(_inter(c, m))
        out[k] = {
            "step_ns": he - hs,
            "computing_ns": _len(c),
            "communication_ns": _len(m),
            "overlapped_ns": ov,
            "comm_not_overlapped_ns": _len(m) - ov,
            "free_ns": (last - first) - _len(busy),
            "stage_ns": last - first,
            "preparing_ns": first - hs,
            "bubble_ns": 0,
        }
    return out


def test_step_breakdown_cpu_gloo_matches_raw_trace(tmp_path):
    store = ingest(GLOO_2RANK, tmp_path / "store", "gloo2")
    df = step_breakdown(store, "gloo2")
    assert list(df.columns[:11]) == [
        "rank", "step", "step_ns", "computing_ns", "comm_not_overlapped_ns", "overlapped_ns",
        "communication_ns", "free_ns", "preparing_ns", "stage_ns", "bubble_ns",
    ]
    assert set(df["mode"]) == {"host"}
    assert sorted(df["rank"].unique()) == [0, 1]
    for rank in (0, 1):
        exp = expected_cpu_breakdown(GLOO_2RANK / f"rank_{rank}" / f"rank{rank}.pt.trace.json")
        got = df[df["rank"] == rank].set_index("step")
        assert sorted(got.index) == sorted(exp)
        for step, cols in exp.items():
            for col, v in cols.items():
                # float µs -> ns conversion may differ by a few ns per event
                assert abs(int(got.loc[step, col]) - v) <= max(2_000, v * 1e-4), (rank, step, col, got.loc[step, col], v)
    # wall-time identity of the msprof-analyze columns
    lhs = df["computing_ns"] + df["comm_not_overlapped_ns"] + df["memory_not_overlapped_ns"] + df["free_ns"]
    assert (lhs == df["stage_ns"] + df["bubble_ns"]).all()
    assert (df["communication_ns"] == df["comm_not_overlapped_ns"] + df["overlapped_ns"]).all()
    assert (df["computing_ns"] > 0).all() and (df["communication_ns"] > 0).all()


def test_step_breakdown_ranks_filter_and_default_run(tmp_path):
    store = ingest(GLOO_2RANK, tmp_path / "store", "gloo2")
    one = step_breakdown(store, ranks=[1])
    assert set(one["rank"]) == {1}
    both = step_breakdown(store)
    assert one.reset_index(drop=True).equals(both[both["rank"] == 1].reset_index(drop=True))
