"""torch.profiler backend (CPU, and CUDA when available): Kineto Chrome traces, one file per step.

Each recorded step is its own profiler session, exported as soon as the step ends
(``rank{r}_step{NNNNNN}.pt.trace.json``, written under a ``.partial`` name and renamed when
complete), so a job killed by ``os._exit`` or SIGKILL loses at most the step in flight. All files
of a window sit in the window folder beside the sidecar and form one collection for ``analyze
ingest``. With ``export_per_step: false`` the window is one session and one file, exported when
the window ends (cheaper for long windows, but nothing survives a hard kill).

Step ranges are marked with ``record_function("ProfilerStep#N")`` where N is the collector's
step number, exactly as ``torch.profiler.profile.step()`` marks them, so readers that know
Kineto traces find the steps. Only public torch APIs are used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import ProfileOptions
from ..window import WindowPlan
from .base import Backend, BackendInfo, Session, Unsupported

MAPPING = {
    "level": "no equivalent (torch.profiler has no collection level): reported when set",
    "with_stack": "profile(with_stack=...)",
    "with_memory": "profile(profile_memory=...)",
    "record_shapes": "profile(record_shapes=...)",
    "with_cpu": "activities += [ProfilerActivity.CPU]",
    "with_device": "activities += [ProfilerActivity.CUDA] when torch.cuda.is_available()",
    "with_modules": "profile(with_modules=...)",
    "with_flops": "profile(with_flops=...)",
    "communication": "always recorded (gloo:/nccl: record_function ranges and record_param_comms); false is reported",
    "data_simplification": "no equivalent (torch_npu only): reported when set",
    "aic_metrics": "no equivalent (Ascend AI Core PMU): reported when set",
    "l2_cache": "no equivalent (Ascend L2 cache): reported when set",
    "mstx": "no equivalent (Ascend mstx): reported when set",
    "export_type": "text = Chrome trace JSON via export_chrome_trace(); db is reported",
    "analyse": "not needed (traces are final when exported): reported when set to false",
    "async_mode": "no equivalent (export is synchronous, at the step boundary): reported when set",
    "export_per_step": "one profile() session per step + export_chrome_trace() at its end (default true)",
    "warmup": "a throw-away profile() session over the warm-up steps",
}


def _torch() -> Any:
    import torch

    return torch


class TorchBackend(Backend):
    MAPPING = MAPPING

    def __init__(self) -> None:
        self.torch = _torch()
        import torch.profiler  # noqa: F401

        self.cuda = bool(self.torch.cuda.is_available())

    def info(self) -> BackendInfo:
        return BackendInfo(
            "torch.profiler", "torch", self.torch.__version__, self.torch.__version__, {"cuda": self.cuda}
        )

    def unsupported(self, options: ProfileOptions, explicit: frozenset[str]) -> list[Unsupported]:
        out: list[Unsupported] = []
        for name in ("level", "data_simplification", "aic_metrics", "l2_cache", "mstx", "async_mode"):
            if name in explicit:
                out.append(Unsupported(name, f"torch.profiler has no {name} option; only torch_npu.profiler uses it"))
        if "analyse" in explicit and not options.analyse:
            out.append(
                Unsupported(
                    "analyse", "torch.profiler traces are final when exported; there is nothing to analyse later"
                )
            )
        if "db" in options.export_type:
            out.append(
                Unsupported("export_type", "torch.profiler writes Chrome trace JSON only (export_type db is torch_npu)")
            )
        if not options.communication:
            out.append(
                Unsupported(
                    "communication", "collectives are always recorded with the CPU activity; cannot be turned off"
                )
            )
        if not options.with_cpu and not self.cuda:
            out.append(
                Unsupported("with_cpu", "no CUDA device: the CPU activity is kept, or nothing would be recorded")
            )
        if options.with_device and not self.cuda and "with_device" in explicit:
            out.append(Unsupported("with_device", "no CUDA device on this host: only host activity is recorded"))
        return out

    def activities(self, options: ProfileOptions) -> list[Any]:
        from torch.profiler import ProfilerActivity

        acts = []
        if options.with_cpu or not self.cuda:
            acts.append(ProfilerActivity.CPU)
        if options.with_device and self.cuda:
            acts.append(ProfilerActivity.CUDA)
        return acts

    def profile_kwargs(self, options: ProfileOptions) -> dict[str, Any]:
        return {
            "activities": self.activities(options),
            "record_shapes": options.record_shapes,
            "profile_memory": options.with_memory,
            "with_stack": options.with_stack,
            "with_flops": options.with_flops,
            "with_modules": options.with_modules,
        }

    def arguments(self, plan: WindowPlan, folder: Path) -> dict[str, Any]:
        kw = self.profile_kwargs(plan.options)
        kw["activities"] = [str(a) for a in kw["activities"]]
        per_step = plan.options.export_per_step is not False
        return {
            "call": "torch.profiler.profile",
            "kwargs": kw,
            "export": "export_chrome_trace() per step" if per_step else "export_chrome_trace() at window end",
        }

    def open(self, plan: WindowPlan, folder: Path, rank: int) -> Session:
        return TorchSession(self, plan, folder, rank)


class TorchSession(Session):
    def __init__(self, backend: TorchBackend, plan: WindowPlan, folder: Path, rank: int):
        self.b = backend
        self.plan = plan
        self.folder = folder
        self.rank = rank
        self.per_step = plan.options.export_per_step is not False
        self.kwargs = backend.profile_kwargs(plan.options)
        self.prof: Any = None
        self.marker: Any = None
        self.pending: list[int] = []  # recorded steps not yet exported (per-window mode)
        self.files: list[Path] = []
        self.notes: list[str] = []

    # -- helpers
    def _begin(self) -> None:
        from torch.profiler import profile

        self.prof = profile(**self.kwargs)
        self.prof.start()

    def _enter(self, step: int) -> None:
        from torch.profiler import record_function

        self.marker = record_function(f"ProfilerStep#{step}")
        self.marker.__enter__()

    def _exit_marker(self) -> None:
        if self.marker is not None:
            m, self.marker = self.marker, None
            m.__exit__(None, None, None)

    def _end(self, export_as: str | None) -> Path | None:
        prof, self.prof = self.prof, None
        if prof is None:
            return None
        prof.stop()
        if export_as is None:
            return None
        path = self.folder / export_as
        tmp = path.with_name(path.name + ".partial")
        prof.export_chrome_trace(str(tmp))
        os.replace(tmp, path)
        self.files.append(path)
        return path

    def _name(self, first: int, last: int) -> str:
        if first == last:
            return f"rank{self.rank}_step{first:06d}.pt.trace.json"
        return f"rank{self.rank}_steps{first:06d}-{last:06d}.pt.trace.json"

    # -- session protocol
    def start(self, step: int) -> None:
        self._begin()
        self._enter(step)

    def advance(self, done: int) -> list[int]:
        self._exit_marker()
        if done < self.plan.start:  # a warm-up step: its data is thrown away when recording begins
            if done + 1 == self.plan.start:
                self._end(None)
            return []
        if self.per_step:
            self._end(self._name(done, done))
            return [done]
        self.pending.append(done)
        return []

    def resume(self, step: int) -> None:
        if self.prof is None:
            self._begin()
        self._enter(step)

    def finish(self, done: int) -> list[int]:
        self._exit_marker()
        if self.per_step:
            self._end(self._name(done, done))
            return [done]
        steps = self.pending + [done]
        self.pending = []
        self._end(self._name(steps[0], steps[-1]))
        return steps

    def abort(self) -> list[int]:
        self._exit_marker()
        if self.per_step or not self.pending:
            self._end(None)  # the step in flight is not exported
            return []
        steps, self.pending = self.pending, []
        self._end(self._name(steps[0], steps[-1]))
        self.notes.append(
            "export_per_step is off: the window's single trace also holds the part of the step in flight when the "
            "job stopped"
        )
        return steps
