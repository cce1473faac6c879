"""The collector in real torch 2.13 CPU training processes (1 rank, and 2 ranks over gloo under torchrun),
and what ingest makes of it.

Training runs in child processes (tests/collector_scripts/), so this test process never imports
torch. Every check compares the files the collector wrote (and the store after `analyze ingest`)
with what the training process did: which steps ran, which were asked for, which crashed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import analyze_here, query, sigint_as_on_a_terminal

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "collector_scripts"
PY = sys.executable
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def train(
    out: Path, config: dict[str, Any], *extra: str, check: bool = True, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    cmd = [PY, str(SCRIPTS / "train.py"), "--config", json.dumps(config), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ENV, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"training failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def sidecar(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "rankscope_window.json").read_text())


def trace_steps(path: Path) -> list[int]:
    events = json.loads(path.read_text())["traceEvents"]
    return sorted(int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#"))


def scalars(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def static(save: Path, start: int, end: int, **opts: Any) -> dict[str, Any]:
    return {"backend": "torch", "static_param": {"save_path": str(save), "start_step": start, "end_step": end, **opts}}


def test_static_window_captures_exactly_the_asked_steps(tmp_path: Path) -> None:
    out = tmp_path / "job"
    train(out, static(out, 2, 5, record_shapes=True), "--steps", "7")
    win = out / "rank_0" / "window_step2"
    files = sorted(p.name for p in win.iterdir())
    assert files == [f"rank0_step00000{s}.pt.trace.json" for s in (2, 3, 4)] + ["rankscope_window.json"]
    for s in (2, 3, 4):
        assert trace_steps(win / f"rank0_step00000{s}.pt.trace.json") == [s]  # one step per file, the right one
    sc = sidecar(win)
    assert (sc["status"], sc["planned_steps"], sc["captured_steps"], sc["reason"]) == (
        "complete",
        [2, 3, 4],
        [2, 3, 4],
        None,
    )
    assert (sc["rank"], sc["world_size"], sc["rank_source"], sc["backend"], sc["framework"]) == (
        0,
        1,
        "default",
        "torch.profiler",
        "torch",
    )
    assert re.match(r"2\.13\.0", sc["framework_version"]) and sc["config"]["record_shapes"] is True
    assert sc["started_at"] <= sc["stopped_at"] and isinstance(sc["pid"], int) and sc["host"]
    rows = scalars(out / "rank_0" / "rankscope_scalars.jsonl")
    assert [r["step"] for r in rows] == list(range(7))
    assert all(r["step_time_ns"] > 0 and set(r["scalars"]) == {"loss", "lr"} for r in rows)

    store = tmp_path / "store"
    analyze_here("ingest", str(out), "--store", str(store))
    cols = {c["producer"]: c for c in query(store, "SELECT producer, status, steps, rank, world_size FROM collections")}
    assert cols["kineto"]["status"] == "complete" and cols["kineto"]["steps"] == [2, 3, 4]
    assert [r["step"] for r in query(store, "SELECT step FROM steps ORDER BY step")] == [2, 3, 4]
    got = query(store, "SELECT step, value FROM scalars WHERE name = 'loss' ORDER BY step")
    assert [g["step"] for g in got] == [r["step"] for r in rows]
    assert [g["value"] for g in got] == pytest.approx([r["scalars"]["loss"] for r in rows], rel=1e-9)  # CLI JSON rounds
    st = query(store, "SELECT step, value FROM scalars WHERE name = 'step_time_ns' ORDER BY step")
    assert [int(g["value"]) for g in st] == [r["step_time_ns"] for r in rows]


def test_one_file_per_window_and_warmup(tmp_path: Path) -> None:
    out = tmp_path / "job"
    train(out, static(out, 2, 4, warmup=1, export_per_step=False), "--steps", "5")
    win = out / "rank_0" / "window_step2"
    traces = sorted(win.glob("*.pt.trace.json"))
    assert [p.name for p in traces] == ["rank0_steps000002-000003.pt.trace.json"]
    assert trace_steps(traces[0]) == [2, 3]  # the warm-up step 1 is not in the trace
    sc = sidecar(win)
    assert (sc["warmup_steps"], sc["captured_steps"], sc["status"]) == ([1], [2, 3], "complete")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unmodified_script_under_torchrun_with_a_tools_json_and_rank_filter(tmp_path: Path) -> None:
    out = tmp_path / "job"
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            {
                "profile": {
                    "enable": True,
                    "profile_type": "static",
                    "ranks": [1],
                    "backend": "torch",
                    "static_param": {"save_path": str(out), "start_step": 1, "end_step": 3},
                },
                "memory_profile": {"enable": False},
            }
        )
    )
    torchrun = Path(PY).parent / "torchrun"
    cmd = [
        PY,
        "-m",
        "collector",
        "run",
        "--config",
        str(tools),
        "--",
        str(torchrun),
        "--nproc-per-node",
        "2",
        "--master-port",
        str(_free_port()),
        str(SCRIPTS / "unmodified_train.py"),
    ]
    # torchrun's agent makes its log folder with tempfile (torchelastic_*): in the test's folder, not /tmp
    (tmp_path / "tmp").mkdir()
    env = {**ENV, "TRAIN_STEPS": "5", "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("trained") == 2
    # only rank 1 was profiled; both ranks counted their 5 optimizer steps
    assert not list((out / "rank_0").glob("window_*"))
    win = out / "rank_1" / "window_step1"
    sc = sidecar(win)
    assert (sc["rank"], sc["world_size"], sc["captured_steps"], sc["status"]) == (1, 2, [1, 2], "complete")
    assert [trace_steps(p) for p in sorted(win.glob("*.pt.trace.json"))] == [[1], [2]]
    for r in (0, 1):
        assert [x["step"] for x in scalars(out / f"rank_{r}" / "rankscope_scalars.jsonl")] == [0, 1, 2, 3, 4]
    store = tmp_path / "store"
    analyze_here("ingest", str(out), "--store", str(store))
    got = query(store, "SELECT rank, producer, status, steps, world_size FROM collections ORDER BY rank, producer")
    assert [(g["rank"], g["producer"]) for g in got] == [
        (0, "collector_scalars"),
        (1, "collector_scalars"),
        (1, "kineto"),
    ]
    assert (got[2]["status"], got[2]["steps"], got[2]["world_size"]) == ("complete", [1, 2], 2)
    comm = query(store, "SELECT step, count(*) AS n FROM comm_ops WHERE rank = 1 GROUP BY step ORDER BY step")
    assert [c["step"] for c in comm] == [1, 2] and all(c["n"] > 0 for c in comm)  # DDP's gloo allreduce in each step


def test_environment_variable_json_with_a_plain_python_script(tmp_path: Path) -> None:
    out = tmp_path / "job"
    env = {
        **ENV,
        "RANKSCOPE_PROFILER_OPTIONS": json.dumps(static(out, 3, 4, with_memory=True)),
        "PYTHONPATH": str(REPO / "collector" / "_bootstrap"),
        "TRAIN_STEPS": "5",
    }
    proc = subprocess.run(
        [PY, str(SCRIPTS / "unmodified_train.py")], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sc = sidecar(out / "rank_0" / "window_step3")
    assert (sc["captured_steps"], sc["config"]["with_memory"], sc["status"]) == ([3], True, "complete")


def test_script_with_its_own_profiler_under_collector_run(tmp_path: Path) -> None:
    """`collector run` around a script that already uses Profiler: the automatic collector (whose static
    window [0, 3) was already open when the script's Profiler started) steps aside with one line, leaves
    no window behind, and the script's own window works normally (no Kineto double-session warning)."""
    auto_out, own_out = tmp_path / "auto", tmp_path / "own"
    cmd = [
        PY,
        "-m",
        "collector",
        "run",
        "--static",
        "0:3",
        "--save-path",
        str(auto_out),
        "--backend",
        "torch",
        "--",
        PY,
        str(SCRIPTS / "train.py"),
        "--steps",
        "4",
        "--config",
        json.dumps(static(own_out, 1, 3)),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=ENV, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("the automatic collector of `python -m collector run` steps aside") == 1, proc.stderr[
        -3000:
    ]
    assert "disableProfiler" not in proc.stderr and "no active profiling session" not in proc.stderr
    assert not list(auto_out.rglob("rankscope_window.json"))  # the automatic window was removed (it captured nothing)
    win = own_out / "rank_0" / "window_step1"
    sc = sidecar(win)
    assert (sc["status"], sc["captured_steps"]) == ("complete", [1, 2])
    assert [trace_steps(p) for p in sorted(win.glob("*.pt.trace.json"))] == [[1], [2]]
    assert [x["step"] for x in scalars(own_out / "rank_0" / "rankscope_scalars.jsonl")] == [0, 1, 2, 3]


def test_automatic_collector_not_started_yet_steps_aside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's Profiler starts before the first optimizer is built (the automatic one is armed, not started)."""
    import collector.autorun as autorun
    from collector import Profiler

    monkeypatch.setattr(autorun, "_installed", None)
    monkeypatch.setenv("RANKSCOPE_PROFILER_OPTIONS", json.dumps(static(tmp_path / "auto", 0, 2)))
    monkeypatch.setattr("collector.optimizer_hook.when_imported", lambda name, cb: None)  # no optimizer patching here
    auto = autorun.install_from_env()
    assert auto is not None and auto.automatic
    own = Profiler(static(tmp_path / "own", 5, 6), handle_signals=False)
    own.start()
    auto.start()  # what the first optimizer's construction would do
    auto.step()
    assert auto.stepped_aside and not auto.started and own.started
    own.stop()
    assert not (tmp_path / "auto").exists()


def test_the_torchrun_launcher_is_not_armed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import collector.autorun as autorun

    py = "/venv/bin/python3"
    assert autorun.is_launcher(
        ["/venv/bin/torchrun", "--nproc-per-node", "2", "train.py"], [py, "/venv/bin/torchrun", "train.py"]
    )
    assert autorun.is_launcher(
        ["-m", "--nproc-per-node", "2"], [py, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    )
    assert autorun.is_launcher(["-m"], [py, "-u", "-m", "torch.distributed.launch", "train.py"])
    assert not autorun.is_launcher(["train.py"], [py, "-u", "train.py"])  # a worker torchrun started
    assert not autorun.is_launcher(["/x/torchrun_helper.py"], [py, "/x/torchrun_helper.py"])
    monkeypatch.setattr(autorun, "_installed", None)
    monkeypatch.setenv("RANKSCOPE_PROFILER_OPTIONS", json.dumps(static(tmp_path / "o", 0, 1)))
    monkeypatch.setattr(autorun, "is_launcher", lambda: True)
    assert autorun.install_from_env() is None


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"training exited ({proc.returncode}) before {path.name}:\n{proc.stderr.read() if proc.stderr else ''}"
            )
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.02)


def test_dynamic_config_edited_while_training_runs(tmp_path: Path) -> None:
    out, dyn, sync = tmp_path / "job", tmp_path / "dyn", tmp_path / "sync"
    sync.mkdir()
    cfg = {
        "backend": "torch",
        "profile_type": "dynamic",
        "static_param": {"save_path": str(out)},
        "dynamic_param": {"config_path": str(dyn), "poll_interval_s": 0},
    }
    proc = subprocess.Popen(
        [
            PY,
            str(SCRIPTS / "train.py"),
            "--config",
            json.dumps(cfg),
            "--steps",
            "14",
            "--pause-at",
            "2,4,6",
            "--sync",
            str(sync),
        ],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        config_file = dyn / "profiler_config.json"
        _wait_for(sync / "ready_2", proc)
        assert json.loads(config_file.read_text())["start_step"] == 0  # generated in the empty folder: off
        config_file.write_text('{"start_step": 8, "active": ')  # a half-saved edit
        (sync / "go_2").touch()
        _wait_for(sync / "ready_4", proc)
        config_file.write_text(json.dumps({"start_step": 3, "active": 2}))  # read after step 5: step 3 is over
        (sync / "go_4").touch()
        _wait_for(sync / "ready_6", proc)
        config_file.write_text(json.dumps({"start_step": 9, "active": 3, "record_shapes": True}))
        (sync / "go_6").touch()
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    wins = sorted((out / "rank_0").glob("window_*"))
    assert [w.name for w in wins] == ["window_step9"]  # neither rejected edit started anything
    sc = sidecar(wins[0])
    assert (sc["trigger"], sc["planned_steps"], sc["captured_steps"], sc["status"]) == (
        "dynamic",
        [9, 10, 11],
        [9, 10, 11],
        "complete",
    )
    assert sc["config"]["record_shapes"] is True
    assert [trace_steps(p) for p in sorted(wins[0].glob("*.pt.trace.json"))] == [[9], [10], [11]]
    log = (dyn / "rankscope_dynamic.log").read_text()
    assert "generated profiler_config.json" in log
    assert "rejected: profiler_config.json is not valid JSON" in log
    assert "rejected: start_step (3) is in the past (the next step is 6)" in log
    assert "accepted: window steps 9..11" in log and "stopped window steps 9..11, all ranks: complete" in log
    assert [r["step"] for r in scalars(out / "rank_0" / "rankscope_scalars.jsonl")] == list(
        range(14)
    )  # training went on
    store = tmp_path / "store"
    analyze_here("ingest", str(out), "--store", str(store))
    assert query(store, "SELECT steps FROM collections WHERE producer = 'kineto'") == [{"steps": [9, 10, 11]}]


# ---------------------------------------------------------------------------- abnormal exits

CRASHES = {
    # mode: (expected return code, sidecar status, reason contains)
    "exception": (1, "aborted", "uncaught RuntimeError at step 3: boom at step 3"),
    "sigterm": (-signal.SIGTERM, "aborted", "SIGTERM received at step 3"),
    "sigint": (-signal.SIGINT, "aborted", "SIGINT received at step 3"),
    "exit": (3, "running", None),  # os._exit: nothing of the collector runs, the per-step files are there
}


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    root = tmp_path_factory.mktemp("crashes")
    procs = {}
    for mode in CRASHES:  # the four jobs run side by side
        d = root / mode
        cmd = [
            PY,
            str(SCRIPTS / "train.py"),
            "--config",
            json.dumps(static(d, 1, 6)),
            "--steps",
            "8",
            "--crash",
            mode,
            "--crash-at",
            "3",
        ]
        procs[mode] = (
            d,
            cmd,
            subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
                env=ENV,
                preexec_fn=sigint_as_on_a_terminal,
            ),
        )
    d = root / "first_step"  # killed in the window's first step: a sidecar and no trace at all
    cmd = [
        PY,
        str(SCRIPTS / "train.py"),
        "--config",
        json.dumps(static(d, 1, 6)),
        "--steps",
        "8",
        "--crash",
        "exit",
        "--crash-at",
        "1",
    ]
    procs["first_step"] = (
        d,
        cmd,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=ENV),
    )
    out = {}
    for mode, (d, cmd, p) in procs.items():
        stdout, stderr = p.communicate(timeout=240)
        out[mode] = (d, subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr))
    return out


@pytest.mark.parametrize("mode", list(CRASHES))
def test_crash_at_step_k_keeps_the_steps_before_k(crashed: dict[str, Any], mode: str) -> None:
    d, proc = crashed[mode]
    code, status, reason = CRASHES[mode]
    assert proc.returncode == code, proc.stderr[-2000:]
    win = d / "rank_0" / "window_step1"
    assert sorted(p.name for p in win.glob("*.pt.trace.json")) == [
        "rank0_step000001.pt.trace.json",
        "rank0_step000002.pt.trace.json",
    ]
    assert not list(win.glob("*.partial"))  # nothing half-written
    sc = sidecar(win)
    assert (sc["status"], sc["captured_steps"], sc["planned_steps"]) == (status, [1, 2], [1, 2, 3, 4, 5])
    assert sc["reason"] == reason
    # kept up to date as each step is exported, so even os._exit leaves the list of files
    assert sc["files"] == ["rank0_step000001.pt.trace.json", "rank0_step000002.pt.trace.json"]
    assert [r["step"] for r in scalars(d / "rank_0" / "rankscope_scalars.jsonl")] == [0, 1, 2]
    if mode == "sigint":  # a KeyboardInterrupt as without the collector, with a note saying the collector passed it on
        assert "\nKeyboardInterrupt\n(SIGINT: the rankscope collector saved its profiling window" in proc.stderr
        assert "prev(signum, frame)" not in proc.stderr


def test_crashed_ranks_ingest_as_partial(crashed: dict[str, Any], tmp_path: Path) -> None:
    store = tmp_path / "store"
    folders = [str(crashed[m][0]) for m in CRASHES]
    analyze_here("ingest", *folders, "--store", str(store))
    cols = query(store, "SELECT run, status, steps, missing FROM collections WHERE producer = 'kineto' ORDER BY run")
    assert [c["run"] for c in cols] == sorted(CRASHES)
    for c in cols:
        assert (c["status"], c["steps"]) == ("partial", [1, 2]), c
        assert "last complete step 2" in c["missing"][0]
    assert query(store, "SELECT count(*) AS n FROM source_files WHERE status = 'error'") == [{"n": 0}]


def test_window_killed_in_its_first_step_ingests_as_partial(crashed: dict[str, Any], tmp_path: Path) -> None:
    d, proc = crashed["first_step"]
    assert proc.returncode == 3
    win = d / "rank_0" / "window_step1"
    assert [p.name for p in win.iterdir()] == ["rankscope_window.json"]
    assert (sidecar(win)["status"], sidecar(win)["captured_steps"], sidecar(win)["files"]) == ("running", [], [])
    store = tmp_path / "store"
    analyze_here("ingest", str(d), "--store", str(store))
    got = query(store, "SELECT producer, status, missing FROM collections WHERE root_path = 'rank_0/window_step1'")
    assert len(got) == 1 and got[0]["status"] == "partial", got
    assert any("no step completed" in m for m in got[0]["missing"])


def test_callbacks_step_and_epoch_granularity(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PY, str(SCRIPTS / "callbacks.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = tmp_path / "steps" / "rank_0" / "window_step3"
    sc = sidecar(steps)
    assert (sc["granularity"], sc["captured_steps"], sc["status"]) == ("step", [3, 4], "complete")
    assert [trace_steps(p) for p in sorted(steps.glob("*.pt.trace.json"))] == [[3], [4]]
    assert [r["step"] for r in scalars(tmp_path / "steps" / "rank_0" / "rankscope_scalars.jsonl")] == [1, 2, 3, 4, 5, 6]
    epochs = tmp_path / "epochs" / "rank_0" / "window_step2"
    sc = sidecar(epochs)
    assert (sc["granularity"], sc["captured_steps"], sc["status"]) == ("epoch", [2, 3], "complete")
    assert [trace_steps(p) for p in sorted(epochs.glob("*.pt.trace.json"))] == [[2], [3]]
    ops = [
        e
        for e in json.loads(sorted(epochs.glob("*.pt.trace.json"))[0].read_text())["traceEvents"]
        if e.get("name") == "aten::addmm"
    ]
    assert len(ops) == 3  # one epoch = 3 batches, all inside the epoch's trace


def test_step_scalars_reach_the_os_in_batches(tmp_path: Path) -> None:
    """The first line and the steps of a profiling window at once, other lines at most once per
    interval, everything at close (stop, exception, SIGTERM, SIGINT, exit all close the writer)."""
    from collector.scalars import ScalarsWriter

    path = tmp_path / "rank_0" / "rankscope_scalars.jsonl"
    w = ScalarsWriter(path, flush_interval_s=3600)

    def on_disk() -> list[int]:
        return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []

    w.write(0, 1, 10, {"loss": 2.5})
    assert on_disk() == [0]  # the first line at once: the file exists from the first step
    w.write(1, 2, 10, {"loss": 2.4})
    w.write(2, 3, 10, {"loss": float("nan"), "lr": 0.1})
    assert on_disk() == [0]  # idle steps wait for the interval
    w.write(3, 4, 10, urgent=True)  # a step inside a profiling window
    assert on_disk() == [0, 1, 2, 3]
    w.write(4, 5, 10)
    w.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1, 2, 3, 4]
    assert lines[2]["scalars"] == {"lr": 0.1} and w.dropped == {"loss"}  # NaN is not a value
    every = ScalarsWriter(tmp_path / "every.jsonl", flush_interval_s=0)
    every.write(0, 1, 1)
    every.write(1, 2, 1)
    assert len((tmp_path / "every.jsonl").read_text().splitlines()) == 2
    every.close()
