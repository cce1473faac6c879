"""The collector's MindSpore backend in real MindSpore 2.10 CPU training (1 process, and 2 ranks under msrun).

MindSpore runs in its own venv (``.venv-ms``, made by ``make setup-test``: MindSpore 2.10 wants
numpy < 2, the main venv has numpy 2 + torch); the collector runs there from the repo (PYTHONPATH),
the training scripts are tests/collector_scripts/ms_train.py. Every job of this module runs once
(module fixtures, started side by side) and several tests read its output: which steps the
training process ran (it prints each step's host-clock bounds), what the collector wrote, what
MindSpore wrote, and what ``analyze ingest`` makes of it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers import analyze_here, query, sigint_as_on_a_terminal

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "collector_scripts" / "ms_train.py"
MS_VENV = REPO / ".venv-ms"
MS_PY = MS_VENV / "bin" / "python"

pytestmark = pytest.mark.skipif(
    not MS_PY.exists(), reason="no MindSpore venv: `make setup-test` makes .venv-ms (MindSpore 2.10 CPU)"
)


def ms_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONHOME"))}
    env.update(
        PYTHONPATH=str(REPO),  # the collector, from the repo (it needs nothing else)
        PATH=f"{MS_VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",  # msrun starts `python` from PATH
        PYTHONUNBUFFERED="1",
        GLOG_v="3",  # MindSpore's own log: errors only
    )
    return env


class Job:
    """A training process started now, waited for later (jobs run side by side)."""

    def __init__(self, out: Path, cmd: list[str], cwd: Path) -> None:
        self.out = out
        self.cmd = cmd
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=ms_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: killed as a whole on timeout
            preexec_fn=sigint_as_on_a_terminal,  # the crash jobs interrupt themselves
        )
        self.stdout = self.stderr = ""
        self.returncode: int | None = None
        self.config_dir: Path | None = None  # a dynamic job's watched folder

    def wait(self, timeout: float = 600) -> Job:
        if self.returncode is None:
            try:
                self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.stdout, self.stderr = self.proc.communicate()
                raise AssertionError(f"timed out: {' '.join(self.cmd)}\n{self.stderr[-3000:]}") from None
            self.returncode = self.proc.returncode
        return self

    def steps(self) -> dict[int, tuple[int, int]]:
        """Step -> (start, end) host-clock ns, as the training process printed them."""
        out = {}
        for line in self.stdout.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "step":
                out[int(parts[1])] = (int(parts[2]), int(parts[3]))
        return out


def train(root: Path, name: str, config: dict[str, Any], *args: str) -> Job:
    out = root / name
    cfg = {**config, "static_param": {"save_path": str(out), **config.get("static_param", {})}}
    return Job(out, [str(MS_PY), str(SCRIPT), "--config", json.dumps(cfg), *args], cwd=root)


def static(start: int, end: int, **opts: Any) -> dict[str, Any]:
    return {"static_param": {"start_step": start, "end_step": end, **opts}}


CRASHES = {  # mode: (return code, sidecar status, reason)
    "exception": (1, "aborted", "uncaught RuntimeError at step 4: boom at step 4"),
    "sigterm": (-signal.SIGTERM, "aborted", "SIGTERM received at step 4"),
    "exit": (3, "running", None),
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Job]:
    root = tmp_path_factory.mktemp("ms_jobs")
    dyn = root / "dyn"
    dyn.mkdir()
    (dyn / "profiler_config.json").write_text(json.dumps({"start_step": 3, "stop_step": 4, "activities": ["CPU"]}))
    started = {
        "static": train(root, "static", static(2, 4, with_memory=True), "--steps", "6"),
        "window": train(root, "window", static(1, 3, export_per_step=False), "--steps", "4", "--mode", "graph"),
        "raw": train(root, "raw", static(1, 2, analyse=False, record_shapes=True), "--steps", "3"),
        "dynamic": train(
            root,
            "dynamic",
            {"profile_type": "dynamic", "dynamic_param": {"config_path": str(dyn), "poll_interval_s": 0}},
            "--steps",
            "6",
        ),
        "model": train(root, "model", static(2, 4), "--loop", "model", "--steps", "5", "--mode", "graph"),
        "sink": train(
            root, "sink", static(2, 4), "--loop", "model", "--sink", "--epochs", "3", "--steps", "2", "--mode", "graph"
        ),
    }
    for mode in CRASHES:
        started[f"crash_{mode}"] = train(
            root, f"crash_{mode}", static(2, 6), "--steps", "7", "--crash", mode, "--crash-at", "4"
        )
    started["dynamic"].config_dir = dyn
    for j in started.values():
        j.wait()
    return started


def sidecar(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "rankscope_window.json").read_text())


def us_ns(v: str) -> int:
    return int(Decimal(v) * 1000)


def trace_ops(ms_dir: Path) -> list[dict[str, Any]]:
    events = json.loads((ms_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    return [e for e in events if e["ph"] == "X" and procs[e["pid"]] == "CPU OP"]


def ok(job: Job) -> Job:
    assert job.returncode == 0, job.stderr[-3000:]
    return job


def test_static_window_one_mindspore_folder_per_step(jobs: dict[str, Job]) -> None:
    job = ok(jobs["static"])
    win = job.out / "rank_0" / "window_step2"
    sc = sidecar(win)
    assert (sc["status"], sc["planned_steps"], sc["captured_steps"], sc["reason"]) == ("complete", [2, 3], [2, 3], None)
    assert (sc["backend"], sc["framework"], sc["framework_version"], sc["rank"], sc["rank_source"]) == (
        "mindspore.profiler",
        "mindspore",
        "2.10.0",
        0,
        "default",
    )
    assert sc["backend_arguments"]["device_target"] == "CPU" and sc["not_honoured"] == []
    assert [s["steps"] for s in sc["segments"]] == [[2], [3]]
    assert sorted(sc["files"]) == sorted(s["path"] for s in sc["segments"])
    bounds = job.steps()
    for seg in sc["segments"]:
        d = win / seg["path"]
        assert d.name.endswith("_ascend_ms") and (d / "FRAMEWORK").is_dir()
        ops = trace_ops(d)  # MindSpore parsed it at the step boundary
        (step,) = seg["steps"]
        t0, t1 = bounds[step]
        assert ops and all(t0 <= us_ns(e["ts"]) <= t1 for e in ops), f"{d.name} holds more than step {step}"
        assert list((d / "FRAMEWORK").glob("cpu_ms_memory_record_*.txt"))  # with_memory -> profile_memory
    rows = [json.loads(x) for x in (job.out / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(6)) and all(r["scalars"]["loss"] > 0 for r in rows)


def test_static_window_ingests(jobs: dict[str, Job], tmp_path: Path) -> None:
    job = ok(jobs["static"])
    store = tmp_path / "store"
    analyze_here("ingest", str(job.out), "--store", str(store))
    cols = query(
        store, "SELECT collection_id, root_path, producer, status, rank FROM collections ORDER BY producer, root_path"
    )
    win = job.out / "rank_0" / "window_step2"
    segs = {f"rank_0/window_step2/{s['path']}": s["steps"] for s in sidecar(win)["segments"]}
    ms = [c for c in cols if c["producer"] == "mindspore"]
    assert sorted(c["root_path"] for c in ms) == sorted(segs)
    assert all((c["status"], c["rank"]) == ("complete", 0) for c in ms)
    bounds = job.steps()
    for c in ms:
        ops = trace_ops(job.out / c["root_path"])
        got = query(
            store,
            f"SELECT count(*) AS n, sum(dur_ns) AS d, min(ts_ns) AS t0, max(ts_ns) AS t1 FROM operators "
            f"WHERE collection_id = '{c['collection_id']}'",
        )[0]
        assert (got["n"], got["d"]) == (len(ops), sum(us_ns(e["dur"]) for e in ops))
        (step,) = segs[c["root_path"]]
        assert bounds[step][0] <= got["t0"] <= got["t1"] <= bounds[step][1]  # the ops of that step, and only them
    mem = query(store, "SELECT count(*) AS n FROM memory_samples")[0]["n"]
    assert mem > 0
    loss = query(store, "SELECT step, value FROM scalars WHERE name = 'loss' ORDER BY step")
    assert [x["step"] for x in loss] == list(range(6))


def test_one_profile_per_window_when_export_per_step_is_off(jobs: dict[str, Job]) -> None:
    job = ok(jobs["window"])
    win = job.out / "rank_0" / "window_step1"
    sc = sidecar(win)
    assert (sc["status"], sc["captured_steps"], [s["steps"] for s in sc["segments"]]) == ("complete", [1, 2], [[1, 2]])
    (d,) = [win / s["path"] for s in sc["segments"]]
    bounds = job.steps()
    ops = trace_ops(d)
    starts = sorted(us_ns(e["ts"]) for e in ops)
    assert bounds[1][0] <= starts[0] and starts[-1] <= bounds[2][1]
    assert any(bounds[1][0] <= t <= bounds[1][1] for t in starts) and any(
        bounds[2][0] <= t <= bounds[2][1] for t in starts
    )


def test_analyse_false_leaves_raw_data_and_offline_analyse(jobs: dict[str, Job], tmp_path: Path) -> None:
    """analyse: false -> FRAMEWORK/ only; `python -m collector analyse` runs MindSpore's own offline analyse,
    which needs the profiler_info_{rank}.json MindSpore writes on Ascend at stop (its CPU profiler writes
    none): without it the command says so; with one (written here in the shape MindSpore's Ascend path
    writes, as the public sample 08_offline_fakeinfo did) MindSpore parses the folder for real."""
    job = ok(jobs["raw"])
    win = job.out / "rank_0" / "window_step1"
    sc = sidecar(win)
    (seg,) = sc["segments"]
    d = win / seg["path"]
    assert not (d / "ASCEND_PROFILER_OUTPUT").exists() and list((d / "FRAMEWORK").glob("cpu_op_execute_timestamp_*"))
    assert any("MindSpore cannot parse CPU-only folders offline" in n for n in sc["notes"])
    assert {u["option"] for u in sc["not_honoured"]} == {"record_shapes"}  # Ascend only: reported, not dropped
    cmd = [str(MS_PY), "-m", "collector", "analyse", str(job.out)]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ms_env(), timeout=300)
    assert first.returncode == 1 and "its offline analyse needs profiler_info_{rank}.json" in first.stderr
    (d / "profiler_info_0.json").write_text(
        json.dumps(
            {
                "profiler_parameters": {
                    "activities": ["CPU"],
                    "record_shapes": False,
                    "profile_memory": False,
                    "is_set_schedule": True,
                    "export_type": ["text"],
                },
                "ms_profiler_info": {"device_id": "0", "rank_id": "0"},
                "cann_profiler_info": {},
                "analysis_cost_time": {},
                "ms_version": "2.10.0",
                "cann_version": "",
                "jit_level": "",
            }
        )
    )
    second = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ms_env(), timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"parsed {d}" in second.stdout
    ops = trace_ops(d)
    t0, t1 = job.steps()[1]
    assert ops and all(t0 <= us_ns(e["ts"]) <= t1 for e in ops)


def test_dynamic_config_in_mindspores_meaning(jobs: dict[str, Job]) -> None:
    job = ok(jobs["dynamic"])
    wins = sorted((job.out / "rank_0").glob("window_*"))
    assert [w.name for w in wins] == ["window_step3"]
    sc = sidecar(wins[0])
    assert (sc["trigger"], sc["planned_steps"], sc["captured_steps"], sc["status"]) == (
        "dynamic",
        [3, 4],
        [3, 4],
        "complete",
    )
    bounds = job.steps()
    for seg in sc["segments"]:
        (step,) = seg["steps"]
        assert all(bounds[step][0] <= us_ns(e["ts"]) <= bounds[step][1] for e in trace_ops(wins[0] / seg["path"]))
    assert job.config_dir is not None
    log = (job.config_dir / "rankscope_dynamic.log").read_text()
    assert "accepted: window steps 3..4" in log
    assert "MindSpore's meaning (stop_step given): start_step 3..stop_step 4, both inclusive" in log


def test_model_train_callback_non_sink_and_sink(jobs: dict[str, Job]) -> None:
    job = ok(jobs["model"])
    sc = sidecar(job.out / "rank_0" / "window_step2")
    # MindSpore's cur_step_num counts from 1: steps 2 and 3 are its 2nd and 3rd batches
    assert (sc["granularity"], sc["captured_steps"], sc["status"]) == ("step", [2, 3], "complete")
    rows = [json.loads(x) for x in (job.out / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and all("loss" in r["scalars"] for r in rows)
    sink = ok(jobs["sink"])
    sc = sidecar(sink.out / "rank_0" / "window_step2")
    assert (sc["granularity"], sc["captured_steps"], sc["status"]) == ("epoch", [2, 3], "complete")
    assert len(sc["segments"]) == 2 and all(
        trace_ops(sink.out / "rank_0" / "window_step2" / s["path"]) for s in sc["segments"]
    )


@pytest.mark.parametrize("mode", list(CRASHES))
def test_crash_at_step_k_keeps_every_step_before_k(jobs: dict[str, Job], mode: str) -> None:
    """Window [2, 6), death in step 4 (after prof.step() of step 3 returned): steps 2 and 3 are on disk,
    each parsed at its own boundary; the step in flight is not exported."""
    job = jobs[f"crash_{mode}"]
    code, status, reason = CRASHES[mode]
    assert job.returncode == code, job.stderr[-3000:]
    win = job.out / "rank_0" / "window_step2"
    sc = sidecar(win)
    assert (sc["status"], sc["captured_steps"], sc["reason"]) == (status, [2, 3], reason)
    assert [s["steps"] for s in sc["segments"]] == [[2], [3]]
    for seg in sc["segments"]:
        assert trace_ops(win / seg["path"])
    others = {p.name for p in win.glob("*_ascend_ms")} - {s["path"] for s in sc["segments"]}
    if mode == "exit":  # nothing ran after os._exit: step 4's profile folder holds only MindSpore's log
        assert len(others) == 1 and not (win / others.pop() / "ASCEND_PROFILER_OUTPUT").exists()
    else:
        assert others == set()  # stopped without parsing and removed: the step in flight is not exported


def test_crashed_jobs_ingest_with_every_completed_step(jobs: dict[str, Job], tmp_path: Path) -> None:
    store = tmp_path / "store"
    analyze_here("ingest", *(str(jobs[f"crash_{m}"].out) for m in CRASHES), "--store", str(store))
    cols = query(store, "SELECT run, root_path, status, missing FROM collections WHERE producer = 'mindspore'")
    by_run: dict[str, list[dict[str, Any]]] = {}
    for c in cols:
        by_run.setdefault(c["run"], []).append(c)
    for mode in CRASHES:
        got = by_run[f"crash_{mode}"]
        parsed = [c for c in got if c["status"] == "partial"]
        assert len(parsed) == 2, got  # steps 2 and 3, partial because the window did not end
        assert all("last complete step 3" in c["missing"][0] for c in parsed)
        if mode == "exit":
            (inflight,) = [c for c in got if c not in parsed]
            assert inflight["status"] == "unparsed"
    assert query(store, "SELECT count(*) AS n FROM source_files WHERE status = 'error'") == [{"n": 0}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def msrun_job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    root = tmp_path_factory.mktemp("msrun")
    out = root / "out"
    cfg = {"static_param": {"save_path": str(out), "start_step": 2, "end_step": 4}}
    cmd = [
        str(MS_VENV / "bin" / "msrun"),
        "--worker_num=2",
        "--local_worker_num=2",
        f"--master_port={_free_port()}",
        "--join=True",
        f"--log_dir={root / 'logs'}",
        str(SCRIPT),
        "--dist",
        "--mode",
        "graph",
        "--steps",
        "5",
        "--config",
        json.dumps(cfg),
    ]
    job = Job(out, cmd, cwd=root)
    job.wait(timeout=600)
    job.stdout = "".join(p.read_text() for p in sorted((root / "logs").glob("worker_*.log")))
    return job


def test_two_ranks_under_msrun(msrun_job: Job, tmp_path: Path) -> None:
    job = msrun_job
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    for r in (0, 1):
        sc = sidecar(job.out / f"rank_{r}" / "window_step2")
        assert (sc["rank"], sc["world_size"], sc["rank_source"], sc["captured_steps"], sc["status"]) == (
            r,
            2,
            "mindspore.communication",
            [2, 3],
            "complete",
        )
    store = tmp_path / "store"
    analyze_here("ingest", str(job.out), "--store", str(store))
    cols = query(store, "SELECT rank, count(*) AS n FROM collections WHERE producer = 'mindspore' GROUP BY rank")
    assert sorted((c["rank"], c["n"]) for c in cols) == [(0, 2), (1, 2)]
    # the gradients' AllReduce (one per parameter: 4) ran in each captured step on each rank
    comm = query(store, "SELECT rank, count(*) AS n, min(op_type) AS t FROM comm_ops GROUP BY rank ORDER BY rank")
    assert [(c["rank"], c["n"], c["t"]) for c in comm] == [(0, 8, "allreduce"), (1, 8, "allreduce")]
    # issue 11 §1.9: MindSpore on CPU writes no step markers; the collector's sidecar says which step
    # each folder holds, so every rank has steps 2 and 3, and the all-reduces match across the ranks
    steps = query(store, "SELECT rank, step, source FROM steps ORDER BY rank, step")
    assert [(s["rank"], s["step"], s["source"]) for s in steps] == [(r, s, "collector") for r in (0, 1) for s in (2, 3)]
    summary = analyze_here("summary", "--store", str(store), "--json")
    assert {r["steps"] for r in json.loads(summary.stdout)["ranks"]} == {2}, summary.stdout
    matched = query(store, "SELECT group_name, ops, instances, complete, note FROM analysis.collective_matching")
    assert [(m["ops"], m["instances"], m["complete"]) for m in matched] == [(16, 8, 8)], matched
    # MindSpore records neither sizes nor step ids on its ops: the note says how they were matched
    assert "16 of 16 ops have none" in matched[0]["note"] and "16 of 16 ops carry no step id" in matched[0]["note"]
    offsets = query(store, "SELECT rank, status FROM analysis.clock_offsets ORDER BY rank")
    assert [o["status"] for o in offsets] == ["reference", "aligned"], offsets
