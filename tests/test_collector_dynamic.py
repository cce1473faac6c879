"""Dynamic profiling config: generated when missing, torch_npu's format understood, bad edits refused
and logged, the file checked cheaply (stat, rate-limited). The real-training version of these
checks is in test_collector_training.py; here the step loop is driven by hand, and the window
state machine runs against a recording backend (no torch needed)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

import collector.profiler as profiler_mod
from collector import Profiler
from collector.backends.base import Backend, BackendInfo, Session
from collector.config import ProfileOptions
from collector.dynamic import CONFIG_NAME, DEFAULT_FILE, LOG_NAME, DynamicWatcher, generated_file

DATA = Path(__file__).resolve().parent / "data" / "collector"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _watcher(folder: Path, clock: Clock, interval: float = 1.0) -> DynamicWatcher:
    return DynamicWatcher(
        folder, interval, ProfileOptions(), frozenset(), "./base_out", [-1], rank=lambda: 0, clock=clock
    )


def _write(path: Path, data: object) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a distinct mtime even within one clock tick


def test_empty_folder_gets_a_config_with_profiling_off(tmp_path: Path) -> None:
    folder = tmp_path / "dyn"
    w = _watcher(folder, Clock())
    assert w.init(next_step=0) is None
    data = json.loads((folder / CONFIG_NAME).read_text())
    assert data == generated_file(ProfileOptions(), [-1], "./base_out") and data["start_step"] == 0
    assert {k: v for k, v in data.items() if k != "_help"} == {k: v for k, v in DEFAULT_FILE.items() if k != "_help"}
    log = (folder / LOG_NAME).read_text()
    assert "generated profiler_config.json" in log and "rank=0" in log
    assert "start_step 0, profiling off" in log


def test_torch_npu_dynamic_config_is_understood(tmp_path: Path) -> None:
    folder = tmp_path / "dyn"
    folder.mkdir()
    (folder / CONFIG_NAME).write_text((DATA / "torch_npu_profiler_config.json").read_text())
    plan = _watcher(folder, Clock()).init(next_step=0)
    assert plan is not None
    assert (plan.start, plan.end, plan.ranks, plan.save_path) == (7, 9, [1], "./prof_out")  # start 7, active 2
    o = plan.options
    assert (o.level, o.aic_metrics, o.record_shapes, o.with_memory, o.analyse) == (
        "level1",
        "PipeUtilization",
        True,
        True,
        False,
    )
    assert o.with_cpu and o.with_device and o.export_type == ["text"]
    log = (folder / LOG_NAME).read_text()
    assert "ignored keys: op_attr, gc_detect_threshold, record_op_args" in log  # torch_npu keys we have no use for
    assert "accepted: window steps 7..8, ranks 1" in log


MS_WINDOWS = Path(__file__).resolve().parent / "data" / "mindspore_cpu_windows"


@pytest.mark.parametrize(
    "edit, steps",
    [
        ({"start_step": 10, "stop_step": 10}, [10]),  # MindSpore's documented "collect step 10"
        ({"start_step": 8, "stop_step": 9}, [8, 9]),  # both ends inclusive
        ({"start_step": 8, "stop_step": 9, "active": 2}, [8, 9]),  # an active that agrees is fine
        ({"start_step": 8, "active": 2}, [8, 9]),  # no stop_step: torch_npu's start_step + active
    ],
)
def test_stop_step_takes_mindspores_meaning(tmp_path: Path, edit: dict[str, int], steps: list[int]) -> None:
    """A file with stop_step is read as MindSpore's DynamicProfilerMonitor reads it: start_step..stop_step,
    both ends inclusive, in the numbers the step() calls count (a real MindSpore 2.10 monitor given
    start_step 3, stop_step 4 recorded exactly the 4th and 5th iterations of a loop calling step() after
    each: 0-based 3 and 4, the collector's step numbers); the log says which meaning was applied."""
    folder = tmp_path / "dyn"
    clock = Clock()
    w = _watcher(folder, clock)
    w.init(next_step=0)
    _write(folder / CONFIG_NAME, edit)
    clock.t += 5
    plan = w.poll(next_step=2, busy=False)
    assert plan is not None and plan.steps == steps
    line = (folder / LOG_NAME).read_text().splitlines()[-1]
    meaning = "MindSpore's meaning (stop_step given)" if "stop_step" in edit else "torch_npu's meaning"
    assert "accepted: window" in line and meaning in line, line


def test_mindspores_own_config_files_work_as_they_are(tmp_path: Path) -> None:
    """The profiler_config.json a real MindSpore 2.10 run used (start_step 20, stop_step 22, MindSpore's
    option names, int/str forms) gives steps 20..22; MindSpore's default (-1/-1) means off."""
    folder = tmp_path / "dyn"
    folder.mkdir()
    real = json.loads((MS_WINDOWS / "profiler_config.json").read_text())
    _write(folder / CONFIG_NAME, real)
    plan = _watcher(folder, Clock()).init(next_step=0)
    assert plan is not None and plan.steps == [20, 21, 22]
    o = plan.options
    assert (o.with_memory, o.with_stack, o.record_shapes, o.with_cpu, o.with_device) == (True, True, True, True, False)
    log = (folder / LOG_NAME).read_text()
    assert "ignored keys: analyse_mode, parallel_strategy" in log
    off = tmp_path / "off"
    off.mkdir()
    _write(off / CONFIG_NAME, {**real, "start_step": -1, "stop_step": -1, "activities": 1, "profiler_level": -1})
    assert _watcher(off, Clock()).init(next_step=0) is None
    assert "start_step -1, stop_step -1 (MindSpore's meaning), profiling off" in (off / LOG_NAME).read_text()


@pytest.mark.parametrize(
    "content, reason",
    [
        ("{not json", "is not valid JSON"),
        ({"start_step": 3, "active": 1}, "start_step (3) is in the past (the next step is 5)"),
        ({"start_step": 9, "stop_step": 8}, "stop_step: 8 is before start_step 9 (MindSpore's window"),
        ({"start_step": -1, "stop_step": 9}, "both must be steps >= 0 (or both -1: off)"),
        ({"start_step": 9, "stop_step": 9, "active": 2}, "active (2) and stop_step (9) disagree"),
        ({"start_step": 9, "active": 0}, "active: 0 steps records nothing"),
        ({"start_step": -4}, "start_step: -4 is not valid"),
        ({"start_step": -1, "level": "level9"}, "level: 'level9' is not one of"),
        ({"start_step": -1, "activities": []}, "with_cpu and with_device are both false"),
        ({"start_step": 9, "active": 3, "stop_step": 12}, "includes both ends: 4 steps"),
        ({"start_step": 9, "ranks": "all"}, "ranks: expected a list of integer ranks"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_invalid_edits_are_rejected_and_logged(tmp_path: Path, content: object, reason: str) -> None:
    folder = tmp_path / "dyn"
    clock = Clock()
    w = _watcher(folder, clock)
    w.init(next_step=0)
    _write(folder / CONFIG_NAME, content)
    clock.t += 5
    assert w.poll(next_step=5, busy=False) is None
    log = (folder / LOG_NAME).read_text().splitlines()
    assert "rejected: " in log[-1] and reason in log[-1], log[-1]
    assert log[-1].endswith("keeping the previous settings")


def test_file_is_stat_at_most_once_per_interval_and_read_only_when_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "dyn"
    clock = Clock()
    w = _watcher(folder, clock, interval=2.0)
    w.init(next_step=0)
    stats: list[str] = []
    reads: list[str] = []
    real_stat = os.stat
    real_read = Path.read_text
    monkeypatch.setattr("collector.dynamic.os.stat", lambda p, *a, **k: stats.append(str(p)) or real_stat(p, *a, **k))
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(str(self)) or real_read(self, *a, **k))
    for step in range(1, 1001):  # 1000 step boundaries within one interval
        assert w.poll(next_step=step, busy=False) is None
    assert len(stats) == 1 and reads == []
    clock.t += 2.0
    w.poll(next_step=1001, busy=False)
    assert len(stats) == 2 and reads == []  # unchanged file: stat only
    _write(folder / CONFIG_NAME, {"start_step": -1, "active": 2})
    stats.clear()  # (os.stat is patched for the whole process: forget the test's own calls)
    clock.t += 2.0
    plan = w.poll(next_step=1002, busy=False)
    assert len(stats) == 1 and len(reads) == 1
    assert plan is not None and (plan.start, plan.end) == (1002, 1004)


# ---------------------------------------------------------------------------- window state machine


class RecordingSession(Session):
    def __init__(self, calls: list[tuple[str, int]], folder: Path):
        self.calls = calls
        self.folder = folder
        self.files: list[Path] = []
        self.notes: list[str] = []

    def start(self, step: int) -> None:
        self.calls.append(("start", step))

    def _save(self, step: int) -> list[int]:
        p = self.folder / f"step{step}.txt"
        p.write_text("data")
        self.files.append(p)
        return [step]

    def advance(self, done: int) -> list[int]:
        self.calls.append(("advance", done))
        return self._save(done)

    def resume(self, step: int) -> None:
        self.calls.append(("resume", step))

    def finish(self, done: int) -> list[int]:
        self.calls.append(("finish", done))
        return self._save(done)

    def abort(self) -> list[int]:
        self.calls.append(("abort", -1))
        return []


class RecordingBackend(Backend):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def info(self) -> BackendInfo:
        return BackendInfo("recording", "none", None, None)

    def unsupported(self, options, explicit):
        return []

    def arguments(self, plan, folder):
        return {}

    def open(self, plan, folder, rank):
        return RecordingSession(self.calls, folder)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> RecordingBackend:
    b = RecordingBackend()
    monkeypatch.setattr(profiler_mod, "select_backend", lambda name: b)
    return b


def test_bad_edit_keeps_the_pending_window_and_edits_during_a_window_wait(
    tmp_path: Path, backend: RecordingBackend
) -> None:
    folder = tmp_path / "dyn"
    out = tmp_path / "out"
    prof = Profiler(
        {
            "profile_type": "dynamic",
            "dynamic_param": {"config_path": str(folder), "poll_interval_s": 0},
            "static_param": {"save_path": str(out)},
        },
        handle_signals=False,
    )
    prof.start()
    cfg = folder / CONFIG_NAME
    _write(cfg, {"start_step": 4, "active": 2})
    prof.step()  # boundary after step 0: the edit is read, window [4, 6) pending
    _write(cfg, "{broken")
    prof.step()  # after step 1: rejected, the pending window stays
    prof.step()  # after step 2
    prof.step()  # after step 3: the window starts
    _write(cfg, {"start_step": -1, "active": 1})  # while the window runs
    prof.step()  # after step 4: the change is seen but not read
    prof.step()  # after step 5: window ends; the edit is read now -> window [6, 7)
    prof.step()  # after step 6
    prof.stop()
    assert backend.calls == [
        ("start", 4),
        ("advance", 4),
        ("resume", 5),
        ("finish", 5),
        ("start", 6),
        ("finish", 6),
    ]
    sidecars = sorted(out.glob("rank_0/window_*/rankscope_window.json"))
    got = [(p.parent.name, json.loads(p.read_text())) for p in sidecars]
    assert [(n, d["planned_steps"], d["captured_steps"], d["status"], d["trigger"]) for n, d in got] == [
        ("window_step4", [4, 5], [4, 5], "complete", "dynamic"),
        ("window_step6", [6], [6], "complete", "dynamic"),
    ]
    log = (folder / LOG_NAME).read_text()
    assert "rejected: profiler_config.json is not valid JSON" in log
    assert "config changed while a window is running; it will be read when the window ends" in log
    assert log.index("stopped window steps 4..5") < log.index("accepted: window step 6")


def test_rank_not_selected_is_logged_and_not_profiled(
    tmp_path: Path, backend: RecordingBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "2")
    folder = tmp_path / "dyn"
    prof = Profiler(
        {
            "profile_type": "dynamic",
            "dynamic_param": {"config_path": str(folder), "poll_interval_s": 0},
            "static_param": {"save_path": str(tmp_path / "out")},
        },
        handle_signals=False,
    )
    prof.start()
    _write(folder / CONFIG_NAME, {"start_step": -1, "active": 1, "ranks": [0, 1]})
    prof.step()
    prof.step()
    prof.stop()
    assert backend.calls == []
    assert "rank 2 not selected for window step 1, ranks 0,1; not profiling" in (folder / LOG_NAME).read_text()
    assert (tmp_path / "out" / "rank_2" / "rankscope_scalars.jsonl").exists()  # scalars: every rank
    assert not list((tmp_path / "out").glob("rank_2/window_*"))


def test_an_option_a_backend_cannot_honour_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from collector.backends.base import Unsupported

    class Picky(RecordingBackend):
        def unsupported(self, options, explicit):
            return [Unsupported("level", "no levels here")] if "level" in explicit else []

    b = Picky()
    monkeypatch.setattr(profiler_mod, "select_backend", lambda name: b)
    folder = tmp_path / "dyn"
    prof = Profiler(
        {
            "profile_type": "dynamic",
            "dynamic_param": {"config_path": str(folder), "poll_interval_s": 0},
            "static_param": {"save_path": str(tmp_path / "out"), "level": "level2"},
        },
        handle_signals=False,
    )
    with caplog.at_level("WARNING", logger="rankscope.collector"):
        prof.start()
        for start in (2, 5):
            _write(folder / CONFIG_NAME, {"start_step": start, "active": 1})
            while prof.step_num <= start:
                prof.step()
        prof.stop()
    sidecars = sorted((tmp_path / "out" / "rank_0").glob("window_*/rankscope_window.json"))
    assert len(sidecars) == 2
    for p in sidecars:  # every window records it ...
        assert json.loads(p.read_text())["not_honoured"] == [{"option": "level", "reason": "no levels here"}]
    msg = "recording cannot honour option 'level': no levels here"
    assert [r.getMessage() for r in caplog.records].count(f"rankscope collector: {msg}") == 1  # ... it is said once
    assert (folder / LOG_NAME).read_text().count(msg) == 1


# ---------------------------------------------------------------------------- the generated file vs the config


def _edit_start(path: Path, start: int) -> None:
    data = json.loads(path.read_text())
    data["start_step"] = start  # the only change: every other value stays as generated
    _write(path, data)


def test_generated_file_shows_the_configs_values_and_does_not_override_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Auditor's case: ranks [1] and with_stack true in the Profiler config, only start_step set in the
    generated file -> rank 0 is not profiled, rank 1 is, with with_stack true; and no "cannot honour"
    report for values nobody changed (level, aic_metrics, l2_cache, ... are spelled out in the file)."""
    from collector.backends.base import Unsupported

    class Picky(RecordingBackend):  # reports every option it is told was set, as torch.profiler does for level etc.
        def unsupported(self, options, explicit):
            return [Unsupported(o, "not here") for o in sorted(explicit)]

    b = Picky()
    monkeypatch.setattr(profiler_mod, "select_backend", lambda name: b)
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        folder = tmp_path / f"dyn{rank}"
        out = tmp_path / f"out{rank}"
        prof = Profiler(
            {
                "profile_type": "dynamic",
                "ranks": [1],
                "static_param": {"with_stack": True, "save_path": str(out)},
                "dynamic_param": {"config_path": str(folder), "poll_interval_s": 0},
            },
            handle_signals=False,
        )
        with caplog.at_level("WARNING", logger="rankscope.collector"):
            prof.start()
            data = json.loads((folder / CONFIG_NAME).read_text())
            assert (data["ranks"], data["with_stack"], data["start_step"]) == ([1], True, 0)
            _edit_start(folder / CONFIG_NAME, 2)
            for _ in range(4):
                prof.step()
            prof.stop()
        sidecars = list(out.glob(f"rank_{rank}/window_*/rankscope_window.json"))
        if rank == 0:
            assert sidecars == []
            assert "rank 0 not selected for window step 2, ranks 1; not profiling" in (folder / LOG_NAME).read_text()
        else:
            (sc,) = sidecars
            d = json.loads(sc.read_text())
            assert d["config"]["with_stack"] is True and d["config"]["ranks"] == [1] and d["status"] == "complete"
            assert d["not_honoured"] == [{"option": "with_stack", "reason": "not here"}]  # the config's own option only
    assert not [r for r in caplog.records if "cannot honour option 'level'" in r.getMessage()]


def test_a_value_changed_in_the_file_overrides_the_config_and_counts_as_given(
    tmp_path: Path, backend: RecordingBackend
) -> None:
    folder = tmp_path / "dyn"
    out = tmp_path / "out"
    prof = Profiler(
        {
            "profile_type": "dynamic",
            "static_param": {"with_stack": True, "save_path": str(out)},
            "dynamic_param": {"config_path": str(folder), "poll_interval_s": 0},
        },
        handle_signals=False,
    )
    prof.start()
    data = json.loads((folder / CONFIG_NAME).read_text())
    data.update(start_step=1, with_stack=False, level="level2")
    _write(folder / CONFIG_NAME, data)
    plan = prof._watcher._read(1)
    assert plan is not None and plan.options.with_stack is False and plan.options.level == "level2"
    assert plan.explicit == {"with_stack", "level"}
    prof.stop()


@pytest.mark.parametrize("name", ["profiler_config.json", "my_prof.json"])
@pytest.mark.parametrize("exists", [True, False])
def test_config_path_may_be_the_file_itself(tmp_path: Path, backend: RecordingBackend, name: str, exists: bool) -> None:
    """MindSpeed-MM allows dynamic_param.config_path to name the file; its folder is the watched folder."""
    folder = tmp_path / "dyn"
    path = folder / name
    if exists:
        folder.mkdir()
        _write(path, {"start_step": 0})
    prof = Profiler(
        {
            "profile_type": "dynamic",
            "dynamic_param": {"config_path": str(path), "poll_interval_s": 0},
            "static_param": {"save_path": str(tmp_path / "out")},
        },
        handle_signals=False,
    )
    prof.start()
    assert path.is_file() and (folder / LOG_NAME).is_file()
    _edit_start(path, 1)
    prof.step()
    prof.step()
    prof.stop()
    assert backend.calls == [("start", 1), ("finish", 1)]
    assert sorted(p.name for p in folder.iterdir()) == sorted({name, LOG_NAME})


def test_the_log_read_back_says_which_rank_is_armed(tmp_path: Path) -> None:
    """``rank_states`` over the log the watcher writes: the rank a window selects is armed, another
    is not selected; the earlier process of a rank and a line that is not the collector's are kept
    apart; 'profiling off' disarms; ``write_config`` refuses what the watcher would reject."""
    from collector.dynamic import rank_states, read_log, write_config

    folder = tmp_path / "dyn"
    clock = Clock()
    w = _watcher(folder, clock)
    w.init(next_step=0)
    with open(folder / LOG_NAME, "a") as f:  # another process of the job (rank 1), and a foreign line
        f.write("2026-01-01 00:00:00 host=node2 pid=4242 rank=1 watching /x (checked at step boundaries)\n")
        f.write("not a line of the collector\n")
    assert write_config(folder / CONFIG_NAME, {"start_step": 4, "active": 0}) == [
        "active: 0 steps records nothing (must be at least 1)"
    ]
    assert write_config(folder / CONFIG_NAME, {"start_step": 4, "active": 2, "ranks": [1]}) == []
    clock.t += 5
    assert w.poll(next_step=1, busy=False) is not None
    lines = read_log(folder / LOG_NAME)
    assert any(ln.pid == 0 and ln.message == "not a line of the collector" for ln in lines)
    st = {(s.host, s.rank): s for s in rank_states(lines)}
    me = st[(socket.gethostname(), 0)]
    assert (me.state, me.window) == ("not selected", "steps 4..5, ranks 1")  # rank 0: the window is rank 1's
    assert st[("node2", 1)].state == "watching"
    w.rank = lambda: 1  # the same watcher as rank 1: the accepted window is its own
    write_config(folder / CONFIG_NAME, {"start_step": 6, "active": 1, "ranks": [-1]})
    clock.t += 5
    w.poll(next_step=2, busy=False)
    me = {s.pid: s for s in rank_states(read_log(folder / LOG_NAME))}[os.getpid()]
    assert (me.rank, me.state, me.window) == (1, "armed", "step 6, all ranks")
    write_config(folder / CONFIG_NAME, {"start_step": 0})
    clock.t += 5
    w.poll(next_step=3, busy=False)
    me = {s.pid: s for s in rank_states(read_log(folder / LOG_NAME))}[os.getpid()]
    assert (me.state, me.window) == ("watching", None)  # 'off' replaced the pending window
