"""A window run as *segments* of an Ascend-style profiler (torch_npu.profiler, mindspore.profiler).

Both profilers are driven the same way: ``profile(schedule=schedule(wait=0, warmup=w, active=n,
repeat=1), on_trace_ready=tensorboard_trace_handler(dir_name=...))``, ``start()``, one ``step()``
per training step, and each ``profile`` writes one output folder (``*_ascend_pt`` /
``*_ascend_ms``) when its schedule leaves ``RECORD_AND_SAVE`` (stop, finalize, then the trace
handler, which parses unless told not to).

A segment is one such ``profile`` over consecutive steps. With ``export_per_step`` (the default
of these backends) every recorded step is its own segment (the first one preceded by the
window's warm-up steps), so each completed step is stopped and finalized on disk at its own step
boundary: an exception, a signal, ``os._exit`` or SIGKILL loses at most the step in flight. With
``export_per_step: false`` the window is one segment (one output folder, the profiler's own
schedule over the whole window; cheaper, but a hard kill leaves nothing final).

Abnormal stop (:meth:`SegmentSession.abort`): the segment in flight is stopped without parsing;
in per-step mode its folder holds only the step in flight, so it is removed (the step in flight
is never exported), in per-window mode it holds the completed steps and is kept (raw, for
``python -m collector analyse``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..window import WindowPlan
from .base import Session


class SegmentSession(Session):
    """Subclasses say how to build one segment's ``profile`` (:meth:`_open`) and which folders it writes."""

    #: suffix of the folders the profiler writes (``_ascend_pt``, ``_ascend_ms``)
    folder_suffix = ""

    def __init__(self, plan: WindowPlan, folder: Path, rank: int, per_step: bool):
        self.plan = plan
        self.folder = folder
        self.rank = rank
        self.per_step = per_step
        self.files: list[Path] = []
        self.notes: list[str] = []
        self.prof: Any = None
        self.seg_steps: list[int] = []  # recorded steps of the open segment that are complete
        self.seg_last = -1  # last step of the open segment
        self.seg_dirs: list[Path] = []  # output folders of the open segment
        self.skip_parse = False
        self.recorded: list[int] = []  # steps whose data is final on disk
        self.segments: list[tuple[Path, list[int]]] = []  # each closed segment's output folder and its steps

    # -- what a backend provides
    def _open(self, first: int, warmup: int, active: int, handler: Any) -> Any:
        """Create and start the ``profile`` of a segment whose first step (warm-up or recorded) is ``first``."""
        raise NotImplementedError

    def _on_segment_closed(self, steps: list[int], dirs: list[Path]) -> None:
        """Called after a segment's data is final on disk (e.g. to note how to parse it)."""

    # -- segments
    def _outputs(self) -> set[Path]:
        return {p for p in self.folder.glob(f"*{self.folder_suffix}") if p.is_dir()}

    def _begin_segment(self, step: int) -> None:
        plan = self.plan
        if step < plan.start:  # the window's warm-up steps come first, in the first segment
            warmup, first_recorded = plan.start - step, plan.start
        else:
            warmup, first_recorded = 0, step
        last = first_recorded if self.per_step else plan.end - 1
        before = self._outputs()
        handler = self._handler()

        def on_trace_ready(prof: Any) -> None:
            if not self.skip_parse:
                handler(prof)

        self.seg_steps = []
        self.seg_last = last
        self.prof = self._open(step, warmup, last - first_recorded + 1, on_trace_ready)
        self.seg_dirs = sorted(self._outputs() - before)

    def _handler(self) -> Any:
        """The profiler's trace handler for the next segment (called right before :meth:`_open`)."""
        raise NotImplementedError

    def _end_segment(self) -> list[int]:
        """After the segment's last step: leave RECORD_AND_SAVE (stop, finalize, trace handler), then stop()."""
        prof, self.prof = self.prof, None
        before = set(self.seg_dirs)
        prof.step()
        prof.stop()
        dirs = sorted(before | (self._outputs() - set(self.files)))
        steps = list(self.seg_steps)
        self.recorded.extend(steps)
        self.files = sorted(set(self.files) | set(dirs))
        self.segments.extend((d, steps) for d in dirs)
        self.seg_dirs = []
        self._on_segment_closed(steps, dirs)
        return steps

    # -- session protocol
    def start(self, step: int) -> None:
        self._begin_segment(step)

    def advance(self, done: int) -> list[int]:
        if done >= self.plan.start:
            self.seg_steps.append(done)
        if done == self.seg_last:
            return self._end_segment()
        return []

    def resume(self, step: int) -> None:
        if self.prof is None:
            self._begin_segment(step)
        else:
            self.prof.step()  # closes step-1's range and opens step's (outside the collector's own work)

    def finish(self, done: int) -> list[int]:
        return self.advance(done)

    def abort(self) -> list[int]:
        self.skip_parse = True  # parsing can take minutes: `python -m collector analyse` does it later
        prof, self.prof = self.prof, None
        if prof is not None:
            before = set(self.seg_dirs)
            prof.stop()
            dirs = sorted(before | (self._outputs() - set(self.files)))
            if self.per_step:  # the folder holds only the step in flight: it is not exported
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
            elif self.seg_steps:
                self.recorded.extend(self.seg_steps)
                self.files = sorted(set(self.files) | set(dirs))
                self.segments.extend((d, list(self.seg_steps)) for d in dirs)
                self.notes.append(
                    "export_per_step is off: the window's single output also holds the part of the step in flight "
                    f"when the job stopped; stopped early, not parsed: run `python -m collector analyse {self.folder}`"
                )
            else:
                for d in dirs:
                    shutil.rmtree(d, ignore_errors=True)
        return list(self.recorded)
