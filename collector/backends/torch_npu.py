"""torch_npu.profiler backend (Ascend NPU): one ``*_ascend_pt`` folder per window.

The window folder is handed to ``tensorboard_trace_handler(dir_name=...)``, so torch_npu writes
its usual ``{host}_{pid}_{time}_ascend_pt/`` inside it, beside the collector's sidecar. Options map
to the real arguments of ``torch_npu.profiler.profile`` and ``_ExperimentalConfig`` (see MAPPING).
The schedule is torch_npu's own ``schedule(wait=0, warmup=w, active=n, repeat=1)`` and the step
labels (``ProfilerStep#N``, the ``Step Id`` of torch_npu's CSVs) are offset to the collector's step
number with ``profile._set_step_num_offset_for_dynamic_prof``, the hook torch_npu's own dynamic
profiler uses (plain ``step_num`` on torch_npu versions without it).

Abnormal exit: the window is stopped without parsing (raw data only: ``FRAMEWORK/`` + ``PROF_*``);
``python -m collector analyse PATH`` parses such folders later with
``torch_npu.profiler.profiler.analyse``. The same applies to windows run with ``analyse: false``.

Never exercised on an NPU here: tested against the signatures recorded from the torch_npu 2.13.0
wheel (tests/data/torch_npu_2.13.0/).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ..config import ProfileOptions
from ..window import WindowPlan
from .base import Backend, BackendInfo, Session, Unsupported

MAPPING = {
    "level": "_ExperimentalConfig(profiler_level=ProfilerLevel.Level0|Level1|Level2|Level_none)",
    "with_stack": "profile(with_stack=...)",
    "with_memory": "profile(profile_memory=...)",
    "record_shapes": "profile(record_shapes=...)",
    "with_cpu": "activities += [ProfilerActivity.CPU]",
    "with_device": "activities += [ProfilerActivity.NPU]",
    "with_modules": "profile(with_modules=...)",
    "with_flops": "profile(with_flops=...)",
    "communication": "always recorded (HCCL operators at every level); false is reported",
    "data_simplification": "_ExperimentalConfig(data_simplification=...)",
    "aic_metrics": "_ExperimentalConfig(aic_metrics=AiCMetrics.<name>); default AiCoreNone at level0/level_none, PipeUtilization at level1/2",
    "l2_cache": "_ExperimentalConfig(l2_cache=...)",
    "mstx": "_ExperimentalConfig(mstx=...) (msprof_tx= on torch_npu versions before mstx)",
    "export_type": "_ExperimentalConfig(export_type=[ExportType.Text, ExportType.Db])",
    "analyse": "tensorboard_trace_handler(analyse_flag=...); false leaves raw data for `python -m collector analyse`",
    "async_mode": "tensorboard_trace_handler(async_mode=...)",
    "export_per_step": "not possible (one *_ascend_pt folder per window, parsed at its end): true is reported",
    "warmup": "schedule(wait=0, warmup=..., active=..., repeat=1)",
}

_LEVELS = {"level0": "Level0", "level1": "Level1", "level2": "Level2", "level_none": "Level_none"}


def _modules() -> tuple[Any, Any]:
    import torch
    import torch_npu  # noqa: F401
    import torch_npu.profiler as tnp

    return torch, tnp


def npu_available() -> bool:
    """True when torch_npu is already imported by the training script and sees an NPU."""
    import sys

    if "torch_npu" not in sys.modules:
        return False
    try:
        torch = sys.modules["torch"]
        return bool(torch.npu.is_available())
    except Exception:  # noqa: BLE001
        return False


def _accepts(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


class TorchNpuBackend(Backend):
    MAPPING = MAPPING

    def __init__(self, modules: tuple[Any, Any] | None = None) -> None:
        self.torch, self.tnp = modules if modules is not None else _modules()
        self.exp_params = _accepts(self.tnp._ExperimentalConfig)

    def info(self) -> BackendInfo:
        import sys

        tn = sys.modules.get("torch_npu")
        return BackendInfo(
            "torch_npu.profiler", "torch", getattr(self.torch, "__version__", None), getattr(tn, "__version__", None)
        )

    def unsupported(self, options: ProfileOptions, explicit: frozenset[str]) -> list[Unsupported]:
        out: list[Unsupported] = []
        if options.export_per_step:
            out.append(
                Unsupported(
                    "export_per_step", "torch_npu writes one *_ascend_pt folder per window and parses it at the end"
                )
            )
        if not options.communication:
            out.append(Unsupported("communication", "HCCL operators are recorded at every level; cannot be turned off"))
        if options.aic_metrics not in (None, "AiCoreNone") and options.level in ("level0", "level_none"):
            out.append(
                Unsupported(
                    "aic_metrics",
                    f"torch_npu collects AI Core metrics only at level1/level2 (level is {options.level})",
                )
            )
        if options.mstx and not ({"mstx", "msprof_tx"} & self.exp_params):
            out.append(Unsupported("mstx", "this torch_npu's _ExperimentalConfig has neither mstx nor msprof_tx"))
        if "export_type" not in self.exp_params and options.export_type != ["text"]:
            out.append(
                Unsupported("export_type", "this torch_npu's _ExperimentalConfig has no export_type (text only)")
            )
        return out

    # -- translation
    def experimental_kwargs(self, options: ProfileOptions) -> dict[str, Any]:
        tnp = self.tnp
        aic = options.aic_metrics
        if aic is None:
            aic = "AiCoreNone" if options.level in ("level0", "level_none") else "PipeUtilization"
        kw: dict[str, Any] = {
            "profiler_level": getattr(tnp.ProfilerLevel, _LEVELS[options.level]),
            "aic_metrics": getattr(tnp.AiCMetrics, aic),
            "l2_cache": options.l2_cache,
            "data_simplification": options.data_simplification,
            "export_type": [getattr(tnp.ExportType, "Text" if t == "text" else "Db") for t in options.export_type],
        }
        if options.mstx:
            kw["mstx" if "mstx" in self.exp_params else "msprof_tx"] = True
        if self.exp_params:
            kw = {k: v for k, v in kw.items() if k in self.exp_params}
        return kw

    def activities(self, options: ProfileOptions) -> list[Any]:
        acts = []
        if options.with_cpu:
            acts.append(self.tnp.ProfilerActivity.CPU)
        if options.with_device:
            acts.append(self.tnp.ProfilerActivity.NPU)
        return acts

    def profile_kwargs(self, plan: WindowPlan, folder: Path, handler: Any) -> dict[str, Any]:
        o = plan.options
        return {
            "activities": self.activities(o),
            "schedule": self.schedule(plan),
            "on_trace_ready": handler,
            "record_shapes": o.record_shapes,
            "profile_memory": o.with_memory,
            "with_stack": o.with_stack,
            "with_flops": o.with_flops,
            "with_modules": o.with_modules,
            "experimental_config": self.tnp._ExperimentalConfig(**self.experimental_kwargs(o)),
        }

    @property
    def offset_labels(self) -> bool:
        """torch_npu >= 2.5 offsets step labels itself; older versions count from the schedule's step 0."""
        return hasattr(self.tnp.profile, "_set_step_num_offset_for_dynamic_prof")

    def schedule(self, plan: WindowPlan) -> Any:
        skip = 0 if self.offset_labels else plan.warm_start  # absolute step numbers on older torch_npu
        return self.tnp.schedule(wait=0, active=plan.end - plan.start, warmup=plan.warmup, repeat=1, skip_first=skip)

    def trace_handler(self, plan: WindowPlan, folder: Path) -> Any:
        return self.tnp.tensorboard_trace_handler(
            dir_name=str(folder), analyse_flag=plan.options.analyse, async_mode=plan.options.async_mode
        )

    def arguments(self, plan: WindowPlan, folder: Path) -> dict[str, Any]:
        o = plan.options
        return {
            "call": "torch_npu.profiler.profile",
            "kwargs": {
                "activities": [str(a) for a in self.activities(o)],
                "schedule": f"schedule(wait=0, active={plan.end - plan.start}, warmup={plan.warmup}, repeat=1, "
                f"skip_first={0 if self.offset_labels else plan.warm_start})",
                "on_trace_ready": f"tensorboard_trace_handler(dir_name={str(folder)!r}, analyse_flag={o.analyse}, async_mode={o.async_mode})",
                "record_shapes": o.record_shapes,
                "profile_memory": o.with_memory,
                "with_stack": o.with_stack,
                "with_flops": o.with_flops,
                "with_modules": o.with_modules,
                "experimental_config": {k: str(v) for k, v in self.experimental_kwargs(o).items()},
            },
            "step_offset": plan.warm_start,
        }

    def open(self, plan: WindowPlan, folder: Path, rank: int) -> Session:
        return TorchNpuSession(self, plan, folder)


class TorchNpuSession(Session):
    def __init__(self, backend: TorchNpuBackend, plan: WindowPlan, folder: Path):
        self.b = backend
        self.plan = plan
        self.folder = folder
        self.files: list[Path] = []
        self.notes: list[str] = []
        self.skip_parse = False
        real_handler = backend.trace_handler(plan, folder)

        def on_trace_ready(prof: Any) -> None:
            if not self.skip_parse:
                real_handler(prof)

        self.prof = backend.tnp.profile(**backend.profile_kwargs(plan, folder, on_trace_ready))
        self.recorded: list[int] = []

    def start(self, step: int) -> None:
        if self.b.offset_labels:
            self.prof._set_step_num_offset_for_dynamic_prof(step)
        else:  # older torch_npu: absolute step numbers (the schedule skips the steps before the window)
            self.prof.step_num = step
            self.prof.current_action = self.prof.schedule(step)
        self.prof.start()

    def advance(self, done: int) -> list[int]:
        if done >= self.plan.start:
            self.recorded.append(done)
        return []  # nothing is final before the window's end

    def resume(self, step: int) -> None:
        self.prof.step()  # closes ProfilerStep#(step-1), moves the schedule, opens ProfilerStep#step

    def finish(self, done: int) -> list[int]:
        self.prof.step()  # leaves RECORD_AND_SAVE: stop, finalize and (analyse_flag) parse
        self.prof.stop()
        self.recorded.append(done)
        if not self.plan.options.analyse:
            self.notes.append(f"raw data only (analyse: false): run `python -m collector analyse {self.folder}`")
        self.files = sorted(self.folder.glob("*_ascend_pt"))
        return list(self.recorded)

    def abort(self) -> list[int]:
        self.skip_parse = True  # parsing can take minutes: leave it to `python -m collector analyse`
        self.prof.stop()
        self.files = sorted(self.folder.glob("*_ascend_pt"))
        self.notes.append(f"stopped early, raw data not parsed: run `python -m collector analyse {self.folder}`")
        return list(self.recorded)


def offline_analyse(
    path: Path, max_process_number: int | None = None, export_type: list[str] | None = None
) -> list[Path]:
    """Parse every unparsed ``*_ascend_pt`` folder below ``path`` with torch_npu's offline analyse."""
    _torch, tnp = _modules()
    from torch_npu.profiler.profiler import analyse

    todo = unparsed_folders(path)
    kwargs: dict[str, Any] = {}
    if max_process_number:
        kwargs["max_process_number"] = max_process_number
    if export_type and "export_type" in _accepts(analyse):
        kwargs["export_type"] = export_type
    for d in todo:
        analyse(profiler_path=str(d), **kwargs)
    return todo


def unparsed_folders(path: Path) -> list[Path]:
    """``*_ascend_pt`` folders with raw data (``PROF_*``) but no ``ASCEND_PROFILER_OUTPUT``."""
    cands = [path] if path.name.endswith("_ascend_pt") else sorted(path.rglob("*_ascend_pt"))
    return [d for d in cands if d.is_dir() and not (d / "ASCEND_PROFILER_OUTPUT").is_dir() and any(d.glob("PROF_*"))]
