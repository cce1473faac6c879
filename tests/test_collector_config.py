"""Collector configuration: every source gives the same validated object; bad values are refused."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from collector import ConfigError, Profiler, ProfilerConfig, from_env, load_config, load_file
from collector.rank import detect_rank
from collector.sources import ENV_VAR

DATA = Path(__file__).resolve().parent / "data" / "collector"
REPO = Path(__file__).resolve().parent.parent


def test_dict_defaults_and_explicit_keys() -> None:
    cfg = ProfilerConfig.from_dict({"ranks": 3, "static_param": {"with_stack": True, "start_step": 0, "end_step": 2}})
    assert cfg.ranks == [3]
    assert cfg.static_param.with_stack is True
    assert (cfg.static_param.start_step, cfg.static_param.end_step) == (0, 2)
    assert cfg.static_param.level == "level0" and cfg.profile_type == "static"
    assert cfg.explicit == {"ranks", "static_param.with_stack", "static_param.start_step", "static_param.end_step"}
    # the transport form carries only what was set, and round-trips
    t = cfg.to_transport()
    assert t == {"ranks": [3], "static_param": {"end_step": 2, "start_step": 0, "with_stack": True}}
    assert ProfilerConfig.from_dict(t) == cfg


def test_every_problem_is_reported_with_its_key() -> None:
    with pytest.raises(ConfigError) as err:
        ProfilerConfig.from_dict(
            {
                "profile_type": "sometimes",
                "ranks": [-2],
                "static_param": {
                    "with_stak": True,
                    "level": "level7",
                    "start_step": 5,
                    "end_step": 5,
                    "with_memory": "yes",
                },
                "scalars": {"collect_freq": 0},
            }
        )
    problems = err.value.problems
    text = "\n".join(problems)
    assert "profile_type: 'sometimes' is not one of static, dynamic" in text
    assert "ranks: -2 is not a rank" in text
    assert "static_param.with_stak: unknown option (did you mean with_stack?)" in text
    assert "static_param.level: 'level7' is not one of" in text
    assert "static_param.with_memory: expected true or false, got 'yes'" in text
    assert "static_param.end_step: 5 must be greater than start_step 5" in text
    assert "scalars.collect_freq: 0 must be at least 1" in text
    assert len(problems) == 7


def test_dataclass_and_namespace_sources() -> None:
    @dataclasses.dataclass
    class Static:
        level: str = "level2"
        start_step: int = 3
        end_step: int = 6

    @dataclasses.dataclass
    class Cfg:
        enable: bool = True
        ranks: list = dataclasses.field(default_factory=lambda: [0])
        static_param: Static = dataclasses.field(default_factory=Static)

    a = load_config(Cfg())
    b = load_config(
        SimpleNamespace(enable=True, ranks=[0], static_param=SimpleNamespace(level=2, start_step=3, end_step=6))
    )
    assert a == b
    assert a.static_param.level == "level2" and a.ranks == [0]


def test_tools_json_profile_section() -> None:
    cfg = load_file(DATA / "tools.json")
    raw = json.loads((DATA / "tools.json").read_text())["profile"]
    assert cfg.enable is True and cfg.ranks == raw["ranks"]
    sp = cfg.static_param
    assert (sp.start_step, sp.end_step) == (raw["static_param"]["start_step"], raw["static_param"]["end_step"])
    assert sp.level == "level1" and sp.aic_metrics == "PipeUtilization"  # aic_metrics_type alias
    assert sp.data_simplification is False and sp.save_path == "./npu_profiling"
    assert cfg.dynamic_param.config_path == raw["dynamic_param"]["config_path"]


def test_mindformers_yaml_flat_and_nested() -> None:
    flat = load_file(DATA / "mindformers_flat.yaml")
    sp = flat.static_param
    # mindformers: profile steps 5..8 counted from 1, inclusive -> collector steps [4, 8)
    assert (sp.start_step, sp.end_step) == (4, 8)
    assert flat.enable is True and flat.ranks == [0]
    assert sp.level == "level1" and sp.with_memory is True and sp.communication is True
    assert sp.save_path == "./output/profile" and sp.data_simplification is True
    nested = load_file(DATA / "mindformers_nested.yaml")
    sp = nested.static_param
    assert (sp.start_step, sp.end_step) == (0, 10)  # init_start_profile: from the first step
    assert nested.ranks == [-1] and sp.level == "level2" and sp.with_stack is True
    assert sp.communication is False and sp.save_path == "mf_out/profile"
    assert any("profile_pipeline" in n for n in nested.notices)


def test_env_variable_json_and_path(tmp_path: Path) -> None:
    assert from_env(environ={}) is None
    cfg = from_env(environ={ENV_VAR: '{"profile_type": "dynamic", "dynamic_param": {"config_path": "/x"}}'})
    assert cfg is not None and cfg.profile_type == "dynamic" and cfg.dynamic_param.config_path == "/x"
    by_path = from_env(environ={ENV_VAR: str(DATA / "tools.json")})
    assert by_path == load_file(DATA / "tools.json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        from_env(environ={ENV_VAR: "{nope"})


def test_rank_from_environment() -> None:
    assert detect_rank({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}) == detect_rank(
        {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}
    )
    info = detect_rank({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert (info.rank, info.world_size, info.local_rank, info.source) == (3, 8, 1, "env:RANK")
    info = detect_rank({"RANK_ID": "5", "RANK_SIZE": "16"})  # Ascend / MindSpore launchers
    assert (info.rank, info.world_size, info.source) == (5, 16, "env:RANK_ID")
    info = detect_rank({"LOCAL_RANK": "2"})
    assert (info.rank, info.source) == (2, "env:LOCAL_RANK")
    info = detect_rank({})
    assert (info.rank, info.world_size, info.source) == (0, 1, "default")


def test_disabled_profiler_does_nothing(tmp_path: Path) -> None:
    prof = Profiler(
        {"enable": False, "static_param": {"save_path": str(tmp_path / "out"), "start_step": 0, "end_step": 1}}
    )
    prof.start()
    prof.step(loss=1.0)
    prof.stop()
    assert not (tmp_path / "out").exists()


def test_cli_show_config_and_bad_config(tmp_path: Path) -> None:
    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "collector", *a], capture_output=True, text=True, cwd=REPO, timeout=60
        )

    ok = run("show-config", "--config", str(DATA / "mindformers_flat.yaml"), "--ranks", "0,1", "--static", "2:5")
    assert ok.returncode == 0, ok.stderr
    shown = json.loads(ok.stdout)
    assert (
        shown["ranks"] == [0, 1] and shown["static_param"]["start_step"] == 2 and shown["static_param"]["end_step"] == 5
    )
    assert shown["static_param"]["with_memory"] is True  # kept from the YAML
    bad = tmp_path / "bad.json"
    bad.write_text('{"static_param": {"start_step": 4, "end_step": 2}}')
    proc = run("run", "--config", str(bad), "--", sys.executable, "-c", "print('should not run')")
    assert proc.returncode == 2 and "should not run" not in proc.stdout
    assert "end_step: 2 must be greater than start_step 4" in proc.stderr and "Traceback" not in proc.stderr
    helped = run("--help")
    assert helped.returncode == 0 and "run" in helped.stdout and "analyse" in helped.stdout


def test_scalars_every_collect_freq_steps(tmp_path: Path) -> None:
    prof = Profiler(
        {
            "scalars": {"collect_freq": 3},
            "static_param": {"save_path": str(tmp_path), "start_step": 1000, "end_step": 1001},
        },
        handle_signals=False,
    )
    prof.start()
    for i in range(10):
        prof.step(loss=float(i), not_a_number="x")
    prof.stop()
    rows = [json.loads(x) for x in (tmp_path / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 3, 6, 9]
    assert [r["scalars"] for r in rows] == [{"loss": 0.0}, {"loss": 3.0}, {"loss": 6.0}, {"loss": 9.0}]
    assert all(r["step_time_ns"] > 0 and r["ts_ns"] > 1_600_000_000 * 10**9 for r in rows)
    assert not list(tmp_path.glob("rank_0/window_*"))  # the window is far ahead: no backend was started


def test_bootstrap_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_SITECUSTOMIZE_RAN'] = '1'\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "collector" / "_bootstrap"), str(other)]),
        ENV_VAR: '{"static_param": {"start_step": 0, "end_step": 1}}',
    }
    code = (
        "import os, sys; print(os.environ.get('SHADOWED_SITECUSTOMIZE_RAN'), 'collector.autorun' in sys.modules, "
        "'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "False"]  # armed, torch not imported, the other sitecustomize ran
    bad = subprocess.run(
        [sys.executable, "-c", "print('still runs')"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**env, ENV_VAR: '{"static_param": {"start_step": 5, "end_step": 1}}'},
    )
    assert bad.returncode == 0 and bad.stdout.strip() == "still runs"
    assert "RANKSCOPE_PROFILER_OPTIONS rejected, profiling disabled" in bad.stderr


def test_a_loss_tensor_requiring_grad_is_stored_without_a_warning(tmp_path: Path) -> None:
    import warnings

    import torch

    prof = Profiler(
        {"static_param": {"save_path": str(tmp_path), "start_step": 50, "end_step": 51}}, handle_signals=False
    )
    prof.start()
    w = torch.ones(2, requires_grad=True)
    loss = (w * 3).sum()
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # torch's "Converting a tensor with requires_grad=True to a scalar" would fail here
        prof.step(loss=loss, lr=torch.tensor(0.5))
    prof.stop()
    (row,) = [json.loads(x) for x in (tmp_path / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()]
    assert row["scalars"] == {"loss": 6.0, "lr": 0.5}


def test_mindformers_near_miss_keys_get_a_did_you_mean_notice() -> None:
    from collector.sources import from_mapping

    flat = from_mapping(
        {
            "profile": True,
            "profile_start_step": 2,
            "profile_stop_step": 4,
            "profile_memroy": True,
            "seed": 0,
            "run_mode": "train",
            "model": {},
            "runner_config": {"epochs": 1},
        }
    )
    assert flat.notices == ["profile_memroy: not a mindformers profiling key, ignored (did you mean profile_memory?)"]
    assert flat.static_param.with_memory is False  # ignored, as mindformers itself would
    nested = from_mapping({"output_dir": "o", "profile": {"profile_on": True, "profiler_levl": 1}})
    assert nested.notices == ["profiler_levl: not a mindformers profiling key, ignored (did you mean profiler_level?)"]


def test_a_negative_start_step_is_reported_alone() -> None:
    with pytest.raises(ConfigError) as err:
        ProfilerConfig.from_dict({"static_param": {"start_step": -2}})
    assert err.value.problems == ["static_param.start_step: -2 is negative (steps count from 0)"]


def test_msrun_scheduler_process_is_not_a_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """msrun runs the training script in its scheduler process too (MS_ROLE=MS_SCHED): the collector stays out."""
    monkeypatch.setenv("MS_ROLE", "MS_SCHED")
    prof = Profiler({"backend": "torch", "static_param": {"save_path": str(tmp_path / "out")}}, handle_signals=False)
    prof.start()
    prof.step(loss=1.0)
    prof.stop()
    assert not prof.started and not (tmp_path / "out").exists()
