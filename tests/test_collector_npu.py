"""torch_npu backend, tested WITHOUT an NPU and without torch_npu.

RECORDED SIGNATURES, NOT HARDWARE: there is no Ascend NPU here and torch_npu must not be
installed (without the CANN toolkit it breaks ``import torch``). The stand-in ``torch_npu.profiler``
below is built from ``tests/data/torch_npu_2.13.0/signatures.json``, which
``record_signatures.py`` read (with ast, nothing executed) from the published torch_npu 2.13.0
wheel: every call the backend makes is bound to the real parameter list (an unknown or
misspelt argument fails here as it would on an NPU host), enum-like values are the real
constants, and the window schedule is checked with the wheel's own ``Schedule.__call__`` code.
What this cannot show: that CANN collects and parses data on a real device.
"""

from __future__ import annotations

import enum
import inspect
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from collector import Profiler
from collector.backends.torch_npu import MAPPING, TorchNpuBackend, unparsed_folders
from collector.config import ProfileOptions, option_names
from collector.window import WindowPlan

REPO = Path(__file__).resolve().parent.parent
SIG = json.loads((Path(__file__).resolve().parent / "data" / "torch_npu_2.13.0" / "signatures.json").read_text())
_KINDS = {
    "POSITIONAL_OR_KEYWORD": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "KEYWORD_ONLY": inspect.Parameter.KEYWORD_ONLY,
    "VAR_POSITIONAL": inspect.Parameter.VAR_POSITIONAL,
    "VAR_KEYWORD": inspect.Parameter.VAR_KEYWORD,
}


def recorded_signature(key: str, drop_self: bool = True) -> inspect.Signature:
    params = []
    for p in SIG[key]:
        if drop_self and p["name"] == "self":
            continue
        default = p["default"] if p["has_default"] else inspect.Parameter.empty
        params.append(inspect.Parameter(p["name"], _KINDS[p["kind"]], default=default))
    return inspect.Signature(params)


class StandIn:
    """A torch_npu.profiler whose callables accept exactly the recorded parameters and log their calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.ProfilerAction = enum.Enum("ProfilerAction", {n: i for i, n in enumerate(SIG["ProfilerAction"])})
        self.ProfilerActivity = types.SimpleNamespace(**{n: f"ProfilerActivity.{n}" for n in SIG["ProfilerActivity"]})
        self.ProfilerLevel = types.SimpleNamespace(**SIG["ProfilerLevel"])
        self.AiCMetrics = types.SimpleNamespace(**SIG["AiCMetrics"])
        self.ExportType = types.SimpleNamespace(**SIG["ExportType"])
        ns: dict[str, Any] = {
            "ProfilerAction": self.ProfilerAction,
            "prof_error": str,
            "ErrCode": types.SimpleNamespace(VALUE=""),
        }
        exec(textwrap.dedent("    " + SIG["Schedule.__call__.source"]), ns)  # the wheel's step -> action rule
        stand = self

        class Schedule:
            __signature__ = recorded_signature("Schedule.__init__")

            def __init__(self, *a: Any, **k: Any) -> None:
                b = recorded_signature("Schedule.__init__").bind(*a, **k)
                stand.calls.append(("schedule", dict(b.arguments)))
                b.apply_defaults()  # recorded defaults are source text ("0")
                self.__dict__.update({n: int(v) for n, v in b.arguments.items()})

            __call__ = ns["__call__"]

        class ExperimentalConfig:
            __signature__ = recorded_signature("_ExperimentalConfig.__init__")

            def __init__(self, *a: Any, **k: Any) -> None:
                b = recorded_signature("_ExperimentalConfig.__init__").bind(*a, **k)
                self.kwargs = dict(b.arguments)
                stand.calls.append(("_ExperimentalConfig", self.kwargs))

        class Profile:
            __signature__ = recorded_signature("profile.__init__")

            def __init__(self, *a: Any, **k: Any) -> None:
                b = recorded_signature("profile.__init__").bind(*a, **k)
                self.kwargs = dict(b.arguments)
                self.schedule = self.kwargs["schedule"]
                self.on_trace_ready = self.kwargs.get("on_trace_ready")
                self.step_num = 0
                self.offset = 0
                self.current_action = self.schedule(0)
                stand.calls.append(("profile", self.kwargs))

            def _set_step_num_offset_for_dynamic_prof(self, step: int) -> None:
                self.offset = step
                stand.calls.append(("offset", {"step": step}))

            def start(self) -> None:
                stand.calls.append(
                    ("start", {"label": self.step_num + self.offset, "action": self.current_action.name})
                )

            def step(self) -> None:
                prev = self.current_action
                self.step_num += 1
                self.current_action = self.schedule(self.step_num)
                stand.calls.append(("step", {"label": self.step_num + self.offset, "action": self.current_action.name}))
                if prev.name == "RECORD_AND_SAVE" and self.on_trace_ready:  # (RECORD_AND_SAVE, *) -> trace ready
                    self.on_trace_ready(self)

            def stop(self) -> None:
                stand.calls.append(("stop", {"action": self.current_action.name}))
                if self.current_action.name in ("RECORD", "RECORD_AND_SAVE") and self.on_trace_ready:
                    self.on_trace_ready(self)

        def tensorboard_trace_handler(*a: Any, **k: Any) -> Any:
            b = recorded_signature("tensorboard_trace_handler").bind(*a, **k)
            stand.calls.append(("tensorboard_trace_handler", dict(b.arguments)))
            return lambda prof: stand.calls.append(("parse", {"label": prof.step_num + prof.offset}))

        tensorboard_trace_handler.__signature__ = recorded_signature("tensorboard_trace_handler")  # type: ignore[attr-defined]

        def analyse(*a: Any, **k: Any) -> None:
            b = recorded_signature("analyse").bind(*a, **k)
            stand.calls.append(("analyse", dict(b.arguments)))

        analyse.__signature__ = recorded_signature("analyse")  # type: ignore[attr-defined]

        for name in SIG["torch_npu.profiler.__all__"]:
            assert name in (
                "profile",
                "ProfilerActivity",
                "supported_activities",
                "tensorboard_trace_handler",
                "schedule",
                "ProfilerAction",
                "_ExperimentalConfig",
                "supported_profiler_level",
                "supported_ai_core_metrics",
                "supported_export_type",
                "ProfilerLevel",
                "AiCMetrics",
                "ExportType",
                "HostSystem",
            )
        self.schedule = Schedule
        self._ExperimentalConfig = ExperimentalConfig
        self.profile = Profile
        self.tensorboard_trace_handler = tensorboard_trace_handler
        self.analyse = analyse

    def named(self, name: str) -> list[dict[str, Any]]:
        return [k for n, k in self.calls if n == name]


@pytest.fixture
def npu(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    stand = StandIn()
    torch_stub = types.SimpleNamespace(__version__="2.13.0", npu=types.SimpleNamespace(is_available=lambda: True))
    pkg = types.ModuleType("torch_npu")
    pkg.__version__ = SIG["torch_npu_version"]  # type: ignore[attr-defined]
    prof_mod = types.ModuleType("torch_npu.profiler")
    prof_mod.__dict__.update({k: v for k, v in vars(stand).items() if not k.startswith("calls")})
    inner = types.ModuleType("torch_npu.profiler.profiler")
    inner.analyse = stand.analyse  # type: ignore[attr-defined]
    # `analyse` is not exported by torch_npu.profiler (recorded __all__): it lives in torch_npu.profiler.profiler
    assert "analyse" not in SIG["torch_npu.profiler.__all__"]
    monkeypatch.setitem(sys.modules, "torch_npu", pkg)
    monkeypatch.setitem(sys.modules, "torch_npu.profiler", prof_mod)
    monkeypatch.setitem(sys.modules, "torch_npu.profiler.profiler", inner)
    monkeypatch.setattr("collector.backends.torch_npu._modules", lambda: (torch_stub, prof_mod))
    stand.module = prof_mod  # type: ignore[attr-defined]
    stand.torch = torch_stub  # type: ignore[attr-defined]
    return stand


def _plan(options: ProfileOptions, explicit: set[str], start: int = 2, end: int = 5) -> WindowPlan:
    return WindowPlan(start, end, options, "./out", "static", explicit=frozenset(explicit))


def test_recorded_api_has_what_the_backend_uses() -> None:
    assert SIG["torch_npu_version"] == "2.13.0" and SIG["recorded_from"].startswith("torch_npu-2.13.0-")
    assert "_set_step_num_offset_for_dynamic_prof" in SIG["profile.methods"]
    assert {"step_num", "current_action", "schedule", "on_trace_ready"} <= set(SIG["profile.__init__.self_attributes"])
    assert set(SIG["ProfilerActivity"]) == {"CPU", "NPU"}
    assert SIG["ProfilerLevel"] == {
        "Level0": "Level0",
        "Level1": "Level1",
        "Level2": "Level2",
        "Level_none": "Level_none",
    }
    assert set(MAPPING) == set(option_names())  # every option has a documented torch_npu mapping


def test_options_become_the_real_arguments(npu: StandIn, tmp_path: Path) -> None:
    b = TorchNpuBackend(modules=(npu.torch, npu.module))  # type: ignore[attr-defined]
    opts = ProfileOptions(
        level="level1",
        with_stack=True,
        with_memory=True,
        record_shapes=True,
        l2_cache=True,
        mstx=True,
        export_type=["text", "db"],
        data_simplification=False,
        with_modules=True,
        export_per_step=False,  # one profile() for the window
    )
    plan = _plan(opts, {"level", "with_stack"})
    kw = b.profile_kwargs(plan, tmp_path, handler=lambda p: None)
    recorded_signature("profile.__init__").bind(**kw)  # every argument exists in torch_npu 2.13.0
    assert kw["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert (kw["record_shapes"], kw["profile_memory"], kw["with_stack"], kw["with_modules"], kw["with_flops"]) == (
        True,
        True,
        True,
        True,
        False,
    )
    exp = npu.named("_ExperimentalConfig")[-1]
    assert exp == {
        "profiler_level": "Level1",
        "aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",  # torch_npu's own default at level1, given explicitly
        "l2_cache": True,
        "data_simplification": False,
        "export_type": ["text", "db"],
        "mstx": True,  # 2.13 has mstx (msprof_tx is deprecated there)
    }
    assert npu.named("schedule")[-1] == {"wait": 0, "active": 3, "warmup": 0, "repeat": 1, "skip_first": 0}
    assert b.unsupported(opts, plan.explicit) == []


def test_level0_aic_default_and_what_cannot_be_honoured(npu: StandIn, tmp_path: Path) -> None:
    b = TorchNpuBackend(modules=(npu.torch, npu.module))  # type: ignore[attr-defined]
    b.profile_kwargs(_plan(ProfileOptions(), set()), tmp_path, handler=None)
    assert npu.named("_ExperimentalConfig")[-1]["aic_metrics"] == "ACL_AICORE_NONE"  # no reset warning from torch_npu
    opts = ProfileOptions(aic_metrics="Memory", async_mode=True, communication=False)
    got = {u.option: u.reason for u in b.unsupported(opts, frozenset({"aic_metrics", "async_mode", "communication"}))}
    assert set(got) == {"aic_metrics", "async_mode", "communication"}  # async parsing: only one profile per window
    assert "level1/level2" in got["aic_metrics"]
    assert b.unsupported(ProfileOptions(async_mode=True, export_per_step=False), frozenset({"async_mode"})) == []


def test_a_window_drives_torch_npu_like_its_own_schedule(npu: StandIn, tmp_path: Path) -> None:
    out = tmp_path / "out"
    prof = Profiler(
        {
            "backend": "torch_npu",
            "static_param": {
                "save_path": str(out),
                "start_step": 2,
                "end_step": 5,
                "warmup": 1,
                "level": "level2",
                "export_per_step": False,
            },
        },
        handle_signals=False,
    )
    prof.start()
    for _ in range(7):
        prof.step()
    prof.stop()
    folder = out / "rank_0" / "window_step2"
    assert npu.named("tensorboard_trace_handler") == [
        {"dir_name": str(folder), "analyse_flag": True, "async_mode": False}
    ]
    seq = [(n, k.get("label"), k.get("action")) for n, k in npu.calls if n in ("start", "step", "stop", "parse")]
    assert seq == [
        ("start", 1, "WARMUP"),  # warm-up step 1 (labels are the collector's step numbers)
        ("step", 2, "RECORD"),
        ("step", 3, "RECORD"),
        ("step", 4, "RECORD_AND_SAVE"),
        ("step", 5, "NONE"),  # after the window's last step: torch_npu stops and parses
        ("parse", 5, None),
        ("stop", None, "NONE"),
    ]
    assert npu.named("offset") == [{"step": 1}]
    side = json.loads((folder / "rankscope_window.json").read_text())
    assert (side["status"], side["captured_steps"], side["backend"], side["warmup_steps"]) == (
        "complete",
        [2, 3, 4],
        "torch_npu.profiler",
        [1],
    )
    assert side["backend_arguments"]["kwargs"]["experimental_config"]["profiler_level"] == "Level2"


def test_aborted_window_is_not_parsed_and_says_how_to_parse_it(npu: StandIn, tmp_path: Path) -> None:
    out = tmp_path / "out"
    prof = Profiler(
        {"backend": "torch_npu", "static_param": {"save_path": str(out), "start_step": 1, "end_step": 5}},
        handle_signals=False,
    )
    prof.start()
    for _ in range(3):
        prof.step()  # steps 0, 1, 2 done; step 3 running
    prof.abort("SIGTERM received at step 3")
    # steps 1 and 2 were finalized (raw) at their own boundaries; step 3's profile stops without its handler
    assert [k["label"] for k in npu.named("parse")] == [2, 3]  # the raw-only handler ran as each step ended
    assert [k["analyse_flag"] for k in npu.named("tensorboard_trace_handler")] == [False, False, False]
    assert npu.named("analyse") == []  # parsing is left to `python -m collector analyse`
    side = json.loads((out / "rank_0" / "window_step1" / "rankscope_window.json").read_text())
    assert (side["status"], side["captured_steps"], side["reason"]) == ("aborted", [1, 2], "SIGTERM received at step 3")
    assert any("python -m collector analyse" in n for n in side["notes"])


def test_offline_analyse_command(npu: StandIn, tmp_path: Path) -> None:
    raw = tmp_path / "job" / "rank_0" / "window_step1" / "host_1_20260101_ascend_pt"
    (raw / "PROF_000001_20260101_ABC" / "device_0").mkdir(parents=True)
    (raw / "FRAMEWORK").mkdir()
    parsed = tmp_path / "job" / "rank_1" / "window_step1" / "host_2_20260101_ascend_pt"
    (parsed / "PROF_000001_20260101_DEF").mkdir(parents=True)
    (parsed / "ASCEND_PROFILER_OUTPUT").mkdir()
    assert unparsed_folders(tmp_path / "job") == [raw]
    from collector.cli import main

    assert main(["analyse", str(tmp_path / "job"), "--max-process-number", "2", "--export-type", "db"]) == 0
    assert npu.named("analyse") == [{"profiler_path": str(raw), "max_process_number": 2, "export_type": ["db"]}]


def test_analyse_without_torch_npu_says_what_is_needed(tmp_path: Path) -> None:
    raw = tmp_path / "x_ascend_pt" / "PROF_000001_1_A"
    raw.mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "collector", "analyse", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 1 and "torch_npu is needed" in proc.stderr and "Traceback" not in proc.stderr


def test_analyse_of_a_missing_path_fails_and_every_argument_has_help(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from collector.cli import main, parser

    missing = tmp_path / "nonexistent"
    assert main(["analyse", str(missing)]) != 0
    assert f"{missing} does not exist" in capsys.readouterr().err
    sub = next(a for a in parser()._actions if a.dest == "cmd")
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest} has no help text"


def test_per_step_profiles_finalize_each_step_and_parse_at_the_windows_end(npu: StandIn, tmp_path: Path) -> None:
    """The default: one torch_npu profile per recorded step (the first one with the warm-up), each leaving
    RECORD_AND_SAVE at its step's boundary (stop + finalize: raw data final on disk, handler with
    analyse_flag=False), then torch_npu's offline analyse over the window folder when the window ends."""
    out = tmp_path / "out"
    prof = Profiler(
        {"backend": "torch_npu", "static_param": {"save_path": str(out), "start_step": 2, "end_step": 5, "warmup": 1}},
        handle_signals=False,
    )
    prof.start()
    for _ in range(7):
        prof.step()
    prof.stop()
    folder = out / "rank_0" / "window_step2"
    assert [k["active"] for k in npu.named("schedule")] == [1, 1, 1]
    assert [k["warmup"] for k in npu.named("schedule")] == [1, 0, 0]
    assert npu.named("offset") == [{"step": 1}, {"step": 3}, {"step": 4}]
    seq = [(n, k.get("label"), k.get("action")) for n, k in npu.calls if n in ("start", "step", "stop", "parse")]
    assert seq == [
        ("start", 1, "WARMUP"),
        ("step", 2, "RECORD_AND_SAVE"),
        ("step", 3, "NONE"),  # step 2 ends: stop + finalize
        ("parse", 3, None),  # (the raw-only handler)
        ("stop", None, "NONE"),
        ("start", 3, "RECORD_AND_SAVE"),
        ("step", 4, "NONE"),
        ("parse", 4, None),
        ("stop", None, "NONE"),
        ("start", 4, "RECORD_AND_SAVE"),
        ("step", 5, "NONE"),
        ("parse", 5, None),
        ("stop", None, "NONE"),
    ]
    assert npu.named("analyse") == []  # the stand-in writes no folder: nothing to parse
    side = json.loads((folder / "rankscope_window.json").read_text())
    assert (side["status"], side["captured_steps"]) == ("complete", [2, 3, 4])
    assert side["backend_arguments"]["segments"] == "one profile() per recorded step"


def _crash_run(tmp_path: Path, mode: str, k: int) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """A process that drives the collector's torch_npu backend (the recorded-API stand-in of this module,
    its calls appended to a file as they happen) and dies in step k as asked."""
    calls = tmp_path / f"{mode}_calls.jsonl"
    out = tmp_path / mode
    script = SCRIPTS / "npu_standin_train.py"
    cfg = {"backend": "torch_npu", "static_param": {"save_path": str(out), "start_step": 2, "end_step": 8}}
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(cfg), mode, str(k), str(calls)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return proc, [json.loads(line) for line in calls.read_text().splitlines()]


SCRIPTS = Path(__file__).resolve().parent / "collector_scripts"
NPU_CRASHES = {"exception": (1, "aborted"), "sigterm": (-15, "aborted"), "exit": (3, "running")}


@pytest.mark.parametrize("mode", list(NPU_CRASHES))
def test_crash_at_step_k_keeps_every_step_before_k(tmp_path: Path, mode: str) -> None:
    """Window [2, 8), the job dies in step 6 (after prof.step() of step 5 returned): steps 2-5 are each
    finalized on disk by then (their profile left RECORD_AND_SAVE: stop + finalize), whatever the death."""
    proc, calls = _crash_run(tmp_path, mode, 6)
    code, status = NPU_CRASHES[mode]
    assert proc.returncode == code, proc.stderr[-2000:]
    finalized = [c["label"] - 1 for c in calls if c["call"] == "parse"]  # the handler runs as step label-1 ends
    assert finalized == [2, 3, 4, 5]
    side = json.loads((tmp_path / mode / "rank_0" / "window_step2" / "rankscope_window.json").read_text())
    assert (side["status"], side["captured_steps"]) == (status, [2, 3, 4, 5])
    if mode != "exit":  # step 6's profile was stopped without its handler (never exported)
        assert calls[-1] == {"call": "stop", "action": "RECORD_AND_SAVE"}
