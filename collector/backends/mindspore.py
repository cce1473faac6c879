"""mindspore.profiler backend (MindSpore >= 2.5: Ascend, GPU, CPU): ``*_ascend_ms`` folders.

Each segment of a window (see :mod:`.segments`: one per recorded step by default, one per window
with ``export_per_step: false``) is one ``mindspore.profiler.profile`` with
``schedule(wait=0, warmup=w, active=n, repeat=1, skip_first=<first step>)`` and
``on_trace_ready=tensorboard_trace_handler(dir_name=<window folder>, analyse_flag, async_mode)``,
so MindSpore writes its usual ``{host}_{pid}_{time}_ascend_ms/`` inside the window folder, beside
the collector's sidecar, and parses it when the segment ends (``analyse: true``). The profile's
``step_num`` starts at the collector's step number, so the ``ProfilerStep#N`` ranges MindSpore
records on Ascend carry the collector's step numbers (MindSpore's ``profile`` has no offset hook:
``step_num`` and ``current_action`` are its public attributes, set before ``start()``).

On CPU MindSpore writes ``FRAMEWORK/`` host files when a segment stops and
``ASCEND_PROFILER_OUTPUT/trace_view.json`` when it is analysed; options MindSpore honours only on
Ascend (level, stacks, shapes, AI Core metrics, L2 cache, mstx, db export, simplification) are
reported once when they are set on another device target.

Offline parsing (``python -m collector analyse``): ``mindspore.profiler.profiler.analyse`` on each
unparsed ``*_ascend_ms`` folder. It reads ``profiler_info_{rank}.json``, which MindSpore writes on
Ascend when the profiler stops; its CPU profiler writes none, so CPU-only folders cannot be parsed
offline by MindSpore (``analyze ingest`` reads their raw ``FRAMEWORK/`` files instead).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..config import ProfileOptions
from ..window import WindowPlan
from .base import Backend, BackendInfo, Session, Unsupported
from .segments import SegmentSession

MAPPING = {
    "level": "_ExperimentalConfig(profiler_level=ProfilerLevel.LevelNone|Level0|Level1|Level2) (Ascend only)",
    "with_stack": "profile(with_stack=...) (Ascend only)",
    "with_memory": "profile(profile_memory=...)",
    "record_shapes": "profile(record_shapes=...) (Ascend only)",
    "with_cpu": "activities += [ProfilerActivity.CPU]",
    "with_device": "activities += [ProfilerActivity.NPU] on Ascend, [ProfilerActivity.GPU] on GPU",
    "with_modules": "no equivalent (MindSpore records its cell scopes itself): reported when set",
    "with_flops": "no equivalent: reported when set",
    "communication": "always recorded (collective operators at every level); false is reported",
    "data_simplification": "_ExperimentalConfig(data_simplification=...) (Ascend only)",
    "aic_metrics": "_ExperimentalConfig(aic_metrics=AicoreMetrics.<name>); default AiCoreNone at level0/level_none, "
    "PipeUtilization at level1/2 (Ascend only)",
    "l2_cache": "_ExperimentalConfig(l2_cache=...) (Ascend only)",
    "mstx": "_ExperimentalConfig(mstx=...) (Ascend only)",
    "export_type": "_ExperimentalConfig(export_type=[ExportType.Text, ExportType.Db]) (db: Ascend only)",
    "analyse": "tensorboard_trace_handler(analyse_flag=...); false leaves raw data (MindSpore's offline parsing "
    "needs Ascend's profiler_info)",
    "async_mode": "tensorboard_trace_handler(async_mode=...)",
    "export_per_step": "one profile() per step, stopped and parsed at its end (default true); false: one profile() "
    "per window",
    "warmup": "schedule(wait=0, warmup=..., active=..., repeat=1) of the window's first profile()",
}

_LEVELS = {"level0": "Level0", "level1": "Level1", "level2": "Level2", "level_none": "LevelNone"}
#: options MindSpore documents as "(Ascend only)"
_ASCEND_ONLY = ("level", "with_stack", "record_shapes", "data_simplification", "aic_metrics", "l2_cache", "mstx")


def _modules() -> tuple[Any, Any]:
    import mindspore
    import mindspore.profiler as msp

    return mindspore, msp


def mindspore_imported() -> bool:
    """True when the training script imported MindSpore (the collector never imports it first)."""
    return "mindspore" in sys.modules


class MindSporeBackend(Backend):
    MAPPING = MAPPING

    def __init__(self, modules: tuple[Any, Any] | None = None) -> None:
        self.ms, self.msp = modules if modules is not None else _modules()

    @property
    def device_target(self) -> str:
        try:
            return str(self.ms.get_context("device_target"))
        except Exception:  # noqa: BLE001 - an unusual context must not stop training
            return "CPU"

    @property
    def ascend(self) -> bool:
        return self.device_target == "Ascend"

    def info(self) -> BackendInfo:
        v = getattr(self.ms, "__version__", None)
        return BackendInfo("mindspore.profiler", "mindspore", v, v, {"device_target": self.device_target})

    def unsupported(self, options: ProfileOptions, explicit: frozenset[str]) -> list[Unsupported]:
        out: list[Unsupported] = []
        target = self.device_target
        if not self.ascend:
            for name in _ASCEND_ONLY:
                if name in explicit:
                    out.append(Unsupported(name, f"MindSpore honours {name} only on Ascend (device target {target})"))
            if "db" in options.export_type:
                out.append(
                    Unsupported("export_type", f"MindSpore writes a db export only on Ascend (device target {target})")
                )
            if options.with_device and "with_device" in explicit and target == "CPU":
                out.append(Unsupported("with_device", "device target CPU: there is no device activity to record"))
            if not options.with_cpu and target == "CPU":
                out.append(
                    Unsupported("with_cpu", "device target CPU: the CPU activity is kept, or nothing is recorded")
                )
        for name in ("with_modules", "with_flops"):
            if name in explicit and getattr(options, name):
                out.append(Unsupported(name, f"mindspore.profiler has no {name} option"))
        if not options.communication:
            out.append(Unsupported("communication", "collective operators are always recorded; cannot be turned off"))
        if options.aic_metrics not in (None, "AiCoreNone") and options.level in ("level0", "level_none"):
            out.append(
                Unsupported(
                    "aic_metrics",
                    f"MindSpore collects AI Core metrics only at level1/level2 (level is {options.level})",
                )
            )
        return out

    # -- translation
    def activities(self, options: ProfileOptions) -> list[Any]:
        act = self.msp.ProfilerActivity
        target = self.device_target
        acts = []
        if options.with_cpu or target == "CPU":
            acts.append(act.CPU)
        if options.with_device and target == "Ascend":
            acts.append(act.NPU)
        elif options.with_device and target == "GPU":
            acts.append(act.GPU)
        return acts

    def experimental_kwargs(self, options: ProfileOptions) -> dict[str, Any]:
        msp = self.msp
        aic = options.aic_metrics
        if aic is None:
            aic = "AiCoreNone" if options.level in ("level0", "level_none") else "PipeUtilization"
        return {
            "profiler_level": getattr(msp.ProfilerLevel, _LEVELS[options.level]),
            "aic_metrics": getattr(msp.AicoreMetrics, aic),
            "l2_cache": options.l2_cache,
            "mstx": options.mstx,
            "data_simplification": options.data_simplification,
            "export_type": [msp.ExportType.Text if t == "text" else msp.ExportType.Db for t in options.export_type],
        }

    def profile_kwargs(
        self, options: ProfileOptions, first: int, warmup: int, active: int, handler: Any
    ) -> dict[str, Any]:
        return {
            "activities": self.activities(options),
            "with_stack": options.with_stack,
            "profile_memory": options.with_memory,
            "record_shapes": options.record_shapes,
            "start_profile": False,
            "schedule": self.msp.schedule(wait=0, warmup=warmup, active=active, repeat=1, skip_first=first),
            "on_trace_ready": handler,
            "experimental_config": self.msp._ExperimentalConfig(**self.experimental_kwargs(options)),
        }

    def arguments(self, plan: WindowPlan, folder: Path) -> dict[str, Any]:
        o = plan.options
        per_step = o.export_per_step is not False
        active = "1" if per_step else str(plan.end - plan.start)
        return {
            "call": "mindspore.profiler.profile",
            "segments": "one profile() per recorded step" if per_step else "one profile() for the window",
            "kwargs": {
                "activities": [str(a) for a in self.activities(o)],
                "with_stack": o.with_stack,
                "profile_memory": o.with_memory,
                "record_shapes": o.record_shapes,
                "start_profile": False,
                "schedule": f"schedule(wait=0, warmup={plan.warmup} (first profile only), active={active}, repeat=1, "
                "skip_first=<its first step>)",
                "on_trace_ready": f"tensorboard_trace_handler(dir_name={str(folder)!r}, analyse_flag={o.analyse}, "
                f"async_mode={o.async_mode})",
                "experimental_config": {k: str(v) for k, v in self.experimental_kwargs(o).items()},
            },
            "device_target": self.device_target,
            "step_num": "the collector's step number of the profile's first step",
        }

    def open(self, plan: WindowPlan, folder: Path, rank: int) -> Session:
        return MindSporeSession(self, plan, folder, rank)


class MindSporeSession(SegmentSession):
    folder_suffix = "_ascend_ms"

    def __init__(self, backend: MindSporeBackend, plan: WindowPlan, folder: Path, rank: int):
        super().__init__(plan, folder, rank, per_step=plan.options.export_per_step is not False)
        self.b = backend

    def _handler(self) -> Any:
        o = self.plan.options
        # (also points MindSpore's output-path singleton at the window folder for the next profile)
        return self.b.msp.tensorboard_trace_handler(
            dir_name=str(self.folder), analyse_flag=o.analyse, async_mode=o.async_mode
        )

    def _open(self, first: int, warmup: int, active: int, handler: Any) -> Any:
        prof = self.b.msp.profile(**self.b.profile_kwargs(self.plan.options, first, warmup, active, handler))
        prof.step_num = first  # ProfilerStep#N labels = the collector's step numbers
        prof.current_action = prof.schedule(first)
        prof.start()
        return prof

    def _on_segment_closed(self, steps: list[int], dirs: list[Path]) -> None:
        if not self.plan.options.analyse and not any("analyse: false" in n for n in self.notes):
            self.notes.append(
                "raw data only (analyse: false): "
                + (
                    f"run `python -m collector analyse {self.folder}`"
                    if self.b.ascend
                    else "MindSpore cannot parse CPU-only folders offline; `analyze ingest` reads their FRAMEWORK/"
                )
            )


# ---------------------------------------------------------------------------- offline analyse


def unparsed_folders(path: Path) -> list[Path]:
    """``*_ascend_ms`` folders with raw data (``FRAMEWORK/`` or ``PROF_*``) but no ``ASCEND_PROFILER_OUTPUT``."""
    cands = [path] if path.name.endswith("_ascend_ms") else sorted(path.rglob("*_ascend_ms"))
    return [
        d
        for d in cands
        if d.is_dir()
        and not (d / "ASCEND_PROFILER_OUTPUT").is_dir()
        and ((d / "FRAMEWORK").is_dir() or any(d.glob("PROF_*")))
    ]


def has_profiler_info(d: Path) -> bool:
    """MindSpore's offline analyse needs ``profiler_info_{rank}.json`` (written on Ascend when the profiler stops)."""
    return any(d.glob("profiler_info*.json"))


def offline_analyse(folders: list[Path], max_process_number: int | None = None) -> list[Path]:
    """Parse ``folders`` with ``mindspore.profiler.profiler.analyse``; returns the folders that got an output."""
    from mindspore.profiler.profiler import analyse

    kwargs: dict[str, Any] = {}
    if max_process_number:
        kwargs["max_process_number"] = max_process_number
    done = []
    for d in folders:
        analyse(profiler_path=str(d), **kwargs)
        if (d / "ASCEND_PROFILER_OUTPUT").is_dir():
            done.append(d)
    return done
