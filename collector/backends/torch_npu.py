"""torch_npu.profiler backend (Ascend NPU): ``*_ascend_pt`` folders, one per step (or per window).

The window folder is handed to ``tensorboard_trace_handler(dir_name=...)``, so torch_npu writes
its usual ``{host}_{pid}_{time}_ascend_pt/`` inside it, beside the collector's sidecar. Options map
to the real arguments of ``torch_npu.profiler.profile`` and ``_ExperimentalConfig`` (see MAPPING).
Each segment of the window (see :mod:`.segments`) is one ``profile`` with torch_npu's own
``schedule(wait=0, warmup=w, active=n, repeat=1)``; the step labels (``ProfilerStep#N``, the
``Step Id`` of torch_npu's CSVs) are offset to the collector's step number with
``profile._set_step_num_offset_for_dynamic_prof``, the hook torch_npu's own dynamic profiler uses
(plain ``step_num`` on torch_npu versions without it).

By default every recorded step is its own segment, stopped and finalized on disk (raw
``FRAMEWORK/`` + ``PROF_*``, not parsed) at its step boundary, so nothing completed is lost when
the job dies, even by ``os._exit``; when the window ends, all its folders are parsed at once with
``torch_npu.profiler.profiler.analyse`` (parallel processes). ``export_per_step: false``: one
segment for the window, parsed by the trace handler when it ends (cheaper, nothing final before).

Abnormal exit: the window is stopped without parsing; ``python -m collector analyse PATH`` parses
such folders later with ``torch_npu.profiler.profiler.analyse``. The same applies to windows run
with ``analyse: false``.

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
from .segments import SegmentSession

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
    "aic_metrics": "_ExperimentalConfig(aic_metrics=AiCMetrics.<name>); default AiCoreNone at level0/level_none, "
    "PipeUtilization at level1/2",
    "l2_cache": "_ExperimentalConfig(l2_cache=...)",
    "mstx": "_ExperimentalConfig(mstx=...) (msprof_tx= on torch_npu versions before mstx)",
    "export_type": "_ExperimentalConfig(export_type=[ExportType.Text, ExportType.Db])",
    "analyse": "tensorboard_trace_handler(analyse_flag=...); false leaves raw data for `python -m collector analyse`",
    "async_mode": "tensorboard_trace_handler(async_mode=...)",
    "export_per_step": "one profile() per step, raw data final as the step ends, all parsed by analyse() at the "
    "window's end (default true); false: one profile() per window, parsed by its trace handler",
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
        if options.async_mode and options.export_per_step is not False:
            out.append(
                Unsupported(
                    "async_mode",
                    "steps are exported one by one and parsed together by torch_npu's offline analyse at the window's "
                    "end, which is synchronous (export_per_step: false parses in the background)",
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

    def profile_kwargs(self, plan: WindowPlan, folder: Path, handler: Any, schedule: Any = None) -> dict[str, Any]:
        """``schedule``: the segment's (default: the window's first segment's)."""
        o = plan.options
        if schedule is None:
            active = 1 if o.export_per_step is not False else plan.end - plan.start
            schedule = self.schedule(plan.warm_start, plan.warmup, active)
        return {
            "activities": self.activities(o),
            "schedule": schedule,
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

    def schedule(self, first: int, warmup: int, active: int) -> Any:
        """A segment's schedule; its first step (warm-up or recorded) is ``first``."""
        skip = 0 if self.offset_labels else first  # absolute step numbers on older torch_npu
        return self.tnp.schedule(wait=0, active=active, warmup=warmup, repeat=1, skip_first=skip)

    def trace_handler(self, plan: WindowPlan, folder: Path) -> Any:
        o = plan.options
        if o.export_per_step is not False:  # raw per step; parsed together at the window's end
            return self.tnp.tensorboard_trace_handler(dir_name=str(folder), analyse_flag=False, async_mode=False)
        return self.tnp.tensorboard_trace_handler(dir_name=str(folder), analyse_flag=o.analyse, async_mode=o.async_mode)

    def arguments(self, plan: WindowPlan, folder: Path) -> dict[str, Any]:
        o = plan.options
        per_step = o.export_per_step is not False
        active = 1 if per_step else plan.end - plan.start
        skip = "0" if self.offset_labels else "<its first step>"
        handler = (
            f"tensorboard_trace_handler(dir_name={str(folder)!r}, analyse_flag=False, async_mode=False)"
            if per_step
            else f"tensorboard_trace_handler(dir_name={str(folder)!r}, analyse_flag={o.analyse}, "
            f"async_mode={o.async_mode})"
        )
        return {
            "call": "torch_npu.profiler.profile",
            "segments": "one profile() per recorded step" if per_step else "one profile() for the window",
            "kwargs": {
                "activities": [str(a) for a in self.activities(o)],
                "schedule": f"schedule(wait=0, active={active}, warmup={plan.warmup} (first profile only), repeat=1, "
                f"skip_first={skip})",
                "on_trace_ready": handler,
                "record_shapes": o.record_shapes,
                "profile_memory": o.with_memory,
                "with_stack": o.with_stack,
                "with_flops": o.with_flops,
                "with_modules": o.with_modules,
                "experimental_config": {k: str(v) for k, v in self.experimental_kwargs(o).items()},
            },
            "step_offset": "the collector's step number of each profile's first step",
            "parse": (f"torch_npu.profiler.profiler.analyse(profiler_path={str(folder)!r}) at the window's end")
            if per_step and o.analyse
            else None,
        }

    def open(self, plan: WindowPlan, folder: Path, rank: int) -> Session:
        return TorchNpuSession(self, plan, folder, rank)


class TorchNpuSession(SegmentSession):
    folder_suffix = "_ascend_pt"

    def __init__(self, backend: TorchNpuBackend, plan: WindowPlan, folder: Path, rank: int = 0):
        super().__init__(plan, folder, rank, per_step=plan.options.export_per_step is not False)
        self.b = backend

    def _handler(self) -> Any:
        return self.b.trace_handler(self.plan, self.folder)

    def _open(self, first: int, warmup: int, active: int, handler: Any) -> Any:
        b = self.b
        prof = b.tnp.profile(**b.profile_kwargs(self.plan, self.folder, handler, b.schedule(first, warmup, active)))
        if b.offset_labels:
            prof._set_step_num_offset_for_dynamic_prof(first)
        else:  # older torch_npu: absolute step numbers (the schedule skips the steps before the segment)
            prof.step_num = first
            prof.current_action = prof.schedule(first)
        prof.start()
        return prof

    def finish(self, done: int) -> list[int]:
        steps = super().finish(done)
        o = self.plan.options
        if self.per_step and o.analyse and self.files:
            from torch_npu.profiler.profiler import analyse

            analyse(profiler_path=str(self.folder))
        elif self.per_step and o.analyse and not self.files:
            self.notes.append("torch_npu wrote no *_ascend_pt folder: nothing to parse")
        if not o.analyse:
            self.notes.append(f"raw data only (analyse: false): run `python -m collector analyse {self.folder}`")
        return steps

    def abort(self) -> list[int]:
        steps = super().abort()
        self.notes.append(f"stopped early, raw data not parsed: run `python -m collector analyse {self.folder}`")
        return steps


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
