"""What a profiler backend offers the collector: translate options, run one window at a time.

A backend turns a :class:`~collector.window.WindowPlan` into calls of a real profiler. The
collector calls the session at step boundaries only:

    session.start(step)        before the first step the backend runs (warm-up or recorded)
    session.advance(done)      after each step that is not the window's last; returns the steps
                               whose data is now on disk
    session.resume(step)       then, once the collector's own bookkeeping is done, before step
                               ``step`` runs (so the collector's work stays out of the traces)
    session.finish(done)       after the window's last step; returns the steps now on disk
    session.abort()            the job is stopping in the middle of the window: keep what is on
                               disk, do not export the step in flight; returns the steps on disk

Every profiling option is either mapped to a real argument of the backend or reported by
:meth:`Backend.unsupported` (the collector logs each such report once per process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ProfileOptions
from ..window import WindowPlan


@dataclass
class Unsupported:
    option: str
    reason: str


class Session:
    """One window of one backend (see module doc)."""

    files: list[Path]
    notes: list[str]

    def start(self, step: int) -> None:
        raise NotImplementedError

    def advance(self, done: int) -> list[int]:
        raise NotImplementedError

    def resume(self, step: int) -> None:
        raise NotImplementedError

    def finish(self, done: int) -> list[int]:
        raise NotImplementedError

    def abort(self) -> list[int]:
        raise NotImplementedError


@dataclass
class BackendInfo:
    name: str  # torch.profiler | torch_npu.profiler
    framework: str  # torch
    framework_version: str | None
    backend_version: str | None
    extra: dict[str, Any] = field(default_factory=dict)


class Backend:
    #: option -> the real argument it becomes (documentation, and a test checks every option is listed)
    MAPPING: dict[str, str] = {}

    def info(self) -> BackendInfo:
        raise NotImplementedError

    def unsupported(self, options: ProfileOptions, explicit: frozenset[str]) -> list[Unsupported]:
        raise NotImplementedError

    def arguments(self, plan: WindowPlan, folder: Path) -> dict[str, Any]:
        """The real arguments the window is started with, as JSON-able text (for the sidecar)."""
        raise NotImplementedError

    def open(self, plan: WindowPlan, folder: Path, rank: int) -> Session:
        raise NotImplementedError
