"""The collector's Profiler: hooks in the training loop, windows, rank selection, abnormal exits.

    prof = Profiler(config)          # dict, dataclass, ProfilerConfig, path, or None (= env variable)
    prof.start()
    for batch in loader:
        train_one_step(batch)
        prof.step(loss=loss.item())  # a step boundary; keyword arguments are step scalars
    prof.stop()

or ``with Profiler(config) as prof: ...``. Steps are numbered from ``start(first_step=0)``: the
step that runs before the first ``step()`` call is step 0.

Output, per rank: ``save_path/rank_{id}/rankscope_scalars.jsonl`` (every rank, every
``collect_freq`` steps) and one folder per profiling window,
``save_path/rank_{id}/window_step{start}[_{n}]/``, holding the backend's own output and the
sidecar ``rankscope_window.json`` (written when the window starts, updated as steps reach the
disk and when it stops).

Abnormal exits: an exception (context manager, or uncaught: via ``sys.excepthook`` + ``atexit``),
SIGTERM or SIGINT in the middle of a window stop the backend without exporting the step in
flight, and mark the sidecar ``aborted`` with the reason and the steps on disk; the signal is then
handled as it would have been without the collector. With the torch.profiler backend each step
is exported when it ends, so even ``os._exit``/SIGKILL loses only the step in flight (the sidecar
then still says ``running``, with the captured steps so far).
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import __version__
from .backends import Backend, Session, select_backend
from .config import ProfilerConfig, option_names
from .dynamic import DynamicWatcher
from .errors import CollectorError
from .rank import RankInfo, detect_rank
from .scalars import ScalarsWriter, default_path
from .sidecar import WindowSidecar
from .sources import load_config
from .window import WindowPlan

log = logging.getLogger("rankscope.collector")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Window:
    """A window being run: plan, backend session, sidecar."""

    def __init__(self, plan: WindowPlan, session: Session, sidecar: WindowSidecar, folder: Path):
        self.plan = plan
        self.session = session
        self.sidecar = sidecar
        self.folder = folder
        self.captured: list[int] = []


class Profiler:
    def __init__(self, config: Any = None, *, granularity: str = "step", handle_signals: bool = True):
        self.config: ProfilerConfig = load_config(config)
        self.granularity = granularity  # step | epoch (what one step() call stands for)
        self.handle_signals = handle_signals
        self.step_num = 0  # the step now running (= steps completed since start, plus first_step)
        self.started = False
        self.stopped = False
        self._rank: RankInfo | None = None
        self._backend: Backend | None = None
        self._backend_failed = False
        self._window: _Window | None = None
        self._pending: list[WindowPlan] = []
        self._watcher: DynamicWatcher | None = None
        self._scalars: ScalarsWriter | None = None
        self._t_begin = 0
        self._in_boundary = False
        self._pending_signal: int | None = None
        self._prev_handlers: dict[int, Any] = {}
        self._prev_excepthook: Any = None
        self._exc_reason: str | None = None
        self._reported: set[str] = set()
        self.windows: list[Path] = []  # window folders written by this process
        self._pid = os.getpid()
        self.automatic = False  # armed by `python -m collector run` (collector.autorun), not by the script
        self.stepped_aside = False

    # ------------------------------------------------------------------ public API
    @property
    def enabled(self) -> bool:
        return self.config.enable

    @property
    def rank(self) -> int:
        return self._rank_info().rank

    def start(self, first_step: int = 0) -> Profiler:
        """Begin counting steps (the next step to run is ``first_step``) and arm profiling."""
        if self.started or not self.config.enable or self.stepped_aside:
            return self
        if os.environ.get("MS_ROLE") == "MS_SCHED":  # msrun's scheduler process runs the script too: not a rank
            return self
        if not self.automatic:  # the script has its own Profiler: an automatic one must not run beside it
            autorun = sys.modules.get(f"{__package__}.autorun")
            if autorun is not None:
                autorun.explicit_profiler_started(self)
        self.started = True
        self.stopped = False
        self._pid = os.getpid()
        self.step_num = int(first_step)
        for notice in self.config.notices:
            self._report_once(f"config:{notice}", notice)
        self._install_exit_hooks()
        cfg = self.config
        if cfg.profile_type == "static":
            sp = cfg.static_param
            opts = _options_of(sp)
            plan = WindowPlan(
                start=sp.start_step,
                end=sp.end_step,
                options=opts,
                save_path=sp.save_path,
                trigger="static",
                ranks=list(cfg.ranks),
                origin=f"static_param ({cfg.source or 'config'})",
                explicit=self._explicit_options(),
            )
            if plan.end <= self.step_num:
                self._report_once(
                    "window-static",
                    f"static window {plan.describe()} is before the first step {self.step_num}; nothing profiled",
                )
            else:
                self._pending.append(plan)
        else:
            dp = cfg.dynamic_param
            self._watcher = DynamicWatcher(
                dp.config_path,
                dp.poll_interval_s,
                _options_of(cfg.static_param),
                self._explicit_options(),
                cfg.static_param.save_path,
                list(cfg.ranks),
                rank=lambda: self._rank_info().rank,
            )
            plan = self._watcher.init(self.step_num)
            if plan is not None:
                self._pending = [plan]
        self._t_begin = time.perf_counter_ns()
        self._maybe_open()
        return self

    def step(self, **scalars: Any) -> None:
        """A step boundary: the step now running is complete; keyword arguments are its scalars."""
        if not self.started or self.stopped:
            return
        t_end = time.perf_counter_ns()
        self._in_boundary = True
        try:
            done = self.step_num
            w = self._window
            saved: list[int] = []
            if w is not None:  # first end the step in the backend, so the work below stays out of its trace
                try:
                    if done >= w.plan.end - 1:
                        saved = w.session.finish(done)
                        self._close_window("complete", None, saved)
                        w = None
                    else:
                        saved = w.session.advance(done)
                except Exception as exc:  # noqa: BLE001 - a backend failure must not stop training
                    self._backend_failure(exc)
                    w = None
            self._write_scalars(done, t_end - self._t_begin, scalars, urgent=w is not None or bool(saved))
            if w is not None and saved:
                w.captured.extend(saved)
                w.sidecar.update(captured_steps=list(w.captured), files=_files_of(w), **_segments_of(w))
            self.step_num = done + 1
            if self._watcher is not None:
                plan = self._watcher.poll(self.step_num, busy=self._window is not None)
                if plan is not None:
                    self._pending = [plan]  # a newer edit replaces a window not started yet
            if w is not None and self._window is w:
                try:
                    w.session.resume(self.step_num)
                except Exception as exc:  # noqa: BLE001
                    self._backend_failure(exc)
            else:
                self._maybe_open()
        finally:
            self._in_boundary = False
        sig, self._pending_signal = self._pending_signal, None
        if sig is not None:
            interrupt = self._on_signal(sig, None)
            if interrupt is not None:
                raise interrupt
        self._t_begin = time.perf_counter_ns()

    def sync_step(self, step: int) -> None:
        """Follow a framework's own step numbering (e.g. after a resume) while no window is running."""
        if self.started and not self.stopped and self._window is None:
            self.step_num = int(step)
            self._maybe_open()

    def record_scalars(self, step: int, **scalars: Any) -> None:
        """Scalars for an already finished step (e.g. logged by a trainer after the step boundary)."""
        if not self.started or self.stopped or not self.config.scalars.enable:
            return
        self._scalars_writer().write(step, time.time_ns(), None, scalars)

    def stop(self) -> None:
        """Stop counting; a window still open is closed with the steps it captured."""
        if not self.started or self.stopped:
            return
        w = self._window
        if w is not None:
            reason = (
                f"stop() called at step {self.step_num}, before the window's end step {w.plan.end}"
                if self.step_num < w.plan.end
                else None
            )
            self._abort_window(reason or "stop() called before the window ended")
        self._finish()

    def abort(self, reason: str) -> None:
        """The job is stopping abnormally: keep what is on disk, mark the window aborted."""
        if not self.started or self.stopped:
            return
        if self._window is not None:
            self._abort_window(reason)
        self._finish()

    def step_aside(self, reason: str) -> None:
        """Stand down for good: another Profiler runs in this process (only one profiler session can).

        A window already open is stopped; if it captured no step its folder is removed, else its
        sidecar ends ``aborted`` with ``reason``. Later ``start()``/``step()`` calls do nothing.
        """
        self.stepped_aside = True
        if not self.started or self.stopped:
            return
        w = self._window
        if w is not None:
            self._abort_window(reason)
            if not w.captured:
                _remove_empty_window(w.folder)
                if w.folder in self.windows:
                    self.windows.remove(w.folder)
        self._finish()

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.abort(f"{exc_type.__name__} at step {self.step_num}" + (f": {exc}" if str(exc) else ""))

    # ------------------------------------------------------------------ windows
    def _maybe_open(self) -> None:
        if self._window is not None or not self._pending:
            return
        plan = self._pending[0]
        if plan.warm_start > self.step_num:
            return
        self._pending.pop(0)
        if plan.warm_start < self.step_num:
            self._report_once(
                f"window-skip:{plan.start}", f"window {plan.describe()} starts before step {self.step_num}; skipped"
            )
            return
        info = self._rank_info()
        if not plan.selects(info.rank):
            if self._watcher is not None:
                self._watcher.log(f"rank {info.rank} not selected for window {plan.describe()}; not profiling")
            return
        backend = self._get_backend()
        if backend is None:
            return
        folder = self._window_folder(plan, info.rank)
        binfo = backend.info()
        not_honoured = []
        for u in backend.unsupported(plan.options, plan.explicit):
            not_honoured.append({"option": u.option, "reason": u.reason})
            self._report_once(f"{binfo.name}:{u.option}", f"{binfo.name} cannot honour option {u.option!r}: {u.reason}")
        try:
            args = backend.arguments(plan, folder)
        except Exception as exc:  # noqa: BLE001
            args = {"error": f"{type(exc).__name__}: {exc}"}
        sidecar = WindowSidecar(
            folder,
            {
                "rank": info.rank,
                "world_size": info.world_size,
                "local_rank": info.local_rank,
                "rank_source": info.source,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "framework": binfo.framework,
                "framework_version": binfo.framework_version,
                "backend": binfo.name,
                "backend_version": binfo.backend_version,
                "collector_version": __version__,
                "granularity": self.granularity,
                "trigger": plan.trigger,
                "origin": plan.origin,
                "config": {**dataclasses.asdict(plan.options), "save_path": plan.save_path, "ranks": plan.ranks},
                "backend_arguments": args,
                "planned_steps": plan.steps,
                "warmup_steps": list(range(plan.warm_start, plan.start)),
                "not_honoured": not_honoured,
                "notes": [],
            },
        )
        self.windows.append(folder)
        if self._watcher is not None:
            self._watcher.log(f"starting window {plan.describe()} in {folder}")
        try:
            session = backend.open(plan, folder, info.rank)
            session.start(self.step_num)  # last: the collector's own work stays out of the trace
        except Exception as exc:  # noqa: BLE001
            sidecar.finish("aborted", f"backend failed to start: {type(exc).__name__}: {exc}")
            self._report_once(
                "backend-start", f"profiling window {plan.describe()} not started: {type(exc).__name__}: {exc}"
            )
            return
        self._window = _Window(plan, session, sidecar, folder)

    def _close_window(self, status: str, reason: str | None, saved: list[int]) -> None:
        w = self._window
        if w is None:
            return
        self._window = None
        for s in saved:
            if s not in w.captured:
                w.captured.append(s)
        if status == "complete" and sorted(w.captured) != w.plan.steps:
            status = "aborted"
            reason = reason or f"only steps {w.captured} of {w.plan.steps} were captured"
        notes = list(w.sidecar.data.get("notes") or []) + list(getattr(w.session, "notes", []))
        w.sidecar.finish(
            status, reason, captured_steps=sorted(w.captured), notes=notes, files=_files_of(w), **_segments_of(w)
        )
        if self._watcher is not None:
            self._watcher.log(
                f"stopped window {w.plan.describe()}: {status}"
                + (f" ({reason})" if reason else "")
                + f", captured steps {sorted(w.captured)}"
            )

    def _abort_window(self, reason: str) -> None:
        w = self._window
        if w is None:
            return
        try:
            saved = w.session.abort()
        except Exception as exc:  # noqa: BLE001
            saved = []
            reason = f"{reason}; backend failed while stopping: {type(exc).__name__}: {exc}"
        self._close_window("aborted", reason, saved)

    def _backend_failure(self, exc: BaseException) -> None:
        w = self._window
        self._report_once(
            "backend-fail", f"profiling backend failed, window closed, training goes on: {type(exc).__name__}: {exc}"
        )
        if w is not None:
            try:
                w.session.abort()
            except Exception:  # noqa: BLE001
                pass
            self._close_window("aborted", f"backend failed: {type(exc).__name__}: {exc}", [])

    def _window_folder(self, plan: WindowPlan, rank: int) -> Path:
        base = Path(plan.save_path) / f"rank_{rank}"
        base.mkdir(parents=True, exist_ok=True)
        name = f"window_step{plan.start}"
        n = 1
        while True:
            folder = base / (name if n == 1 else f"{name}_{n}")
            try:
                folder.mkdir()
                return folder
            except FileExistsError:
                n += 1

    def _get_backend(self) -> Backend | None:
        if self._backend is None and not self._backend_failed:
            try:
                self._backend = select_backend(self.config.backend)
            except CollectorError as exc:
                self._backend_failed = True
                self._report_once("backend", f"no profiling backend, windows are skipped: {exc}")
        return self._backend

    # ------------------------------------------------------------------ scalars, rank
    def _rank_info(self) -> RankInfo:
        """Detected again until the framework answers (torch.distributed / mindspore.communication are often
        initialised after start())."""
        if self._rank is None or self._rank.source not in ("torch.distributed", "mindspore.communication"):
            self._rank = detect_rank()
        return self._rank

    def _scalars_writer(self) -> ScalarsWriter:
        if self._scalars is None:
            path = default_path(self.config.static_param.save_path, self._rank_info().rank)
            self._scalars = ScalarsWriter(path, self.config.scalars.collect_freq)
        return self._scalars

    def _write_scalars(self, step: int, step_time_ns: int, scalars: dict[str, Any], urgent: bool = False) -> None:
        """``urgent``: the step was inside a profiling window (its line goes to the OS at once, like its trace)."""
        if not self.config.scalars.enable:
            return
        w = self._scalars or self._scalars_writer()
        if w.due(step):
            try:
                w.write(step, time.time_ns(), step_time_ns, scalars, urgent=urgent)
            except OSError as exc:
                self._report_once("scalars", f"cannot write step scalars to {w.path}: {exc}")
                self.config.scalars.enable = False

    # ------------------------------------------------------------------ exits
    def _install_exit_hooks(self) -> None:
        atexit.register(self._atexit)
        self._prev_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                try:
                    prev = signal.getsignal(sig)
                    if prev is signal.SIG_IGN or prev is None:
                        continue
                    signal.signal(sig, self._signal_handler)
                    self._prev_handlers[sig] = prev
                except (ValueError, OSError):
                    pass

    def _remove_exit_hooks(self) -> None:
        atexit.unregister(self._atexit)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._prev_excepthook
        if threading.current_thread() is threading.main_thread():
            for sig, prev in self._prev_handlers.items():
                try:
                    if signal.getsignal(sig) == self._signal_handler:
                        signal.signal(sig, prev)
                except (ValueError, OSError):
                    pass
        self._prev_handlers = {}

    def _finish(self) -> None:
        self.stopped = True
        if self._scalars is not None:
            self._scalars.close()
        self._remove_exit_hooks()
        if self._watcher is not None:
            self._watcher.log("collector stopped")

    def _forked(self) -> bool:
        """True in a child forked from the training process (e.g. a DataLoader worker): hands off."""
        return os.getpid() != self._pid

    def _excepthook(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._forked():
            (self._prev_excepthook or sys.__excepthook__)(exc_type, exc, tb)
            return
        self._exc_reason = f"uncaught {exc_type.__name__} at step {self.step_num}" + (f": {exc}" if str(exc) else "")
        self.abort(self._exc_reason)
        prev = self._prev_excepthook or sys.__excepthook__
        prev(exc_type, exc, tb)

    def _atexit(self) -> None:
        if self.started and not self.stopped and not self._forked():
            if self._window is not None:
                self.abort(self._exc_reason or f"process exited at step {self.step_num} without stop()")
            else:
                self._finish()

    def _signal_handler(self, signum: int, frame: Any) -> None:
        if self._forked():
            prev = self._prev_handlers.get(signum, signal.SIG_DFL)
            if callable(prev):
                prev(signum, frame)
            elif prev == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        if self._in_boundary:
            self._pending_signal = signum  # handled at the end of step()
            return
        interrupt = self._on_signal(signum, frame)
        if interrupt is not None:
            raise interrupt  # (raised here, one frame below the interrupted line)

    def _on_signal(self, signum: int, frame: Any) -> KeyboardInterrupt | None:
        """Save the window, then act as the previous handler would; Python's default SIGINT handler
        is replaced by a KeyboardInterrupt returned to the caller (raised with a note saying the
        collector only passed it on, so a traceback does not point at the collector as the cause)."""
        name = signal.Signals(signum).name
        prev = self._prev_handlers.get(signum, signal.SIG_DFL)
        self.abort(f"{name} received at step {self.step_num}")  # also restores the previous handlers
        if prev is signal.default_int_handler:
            exc = KeyboardInterrupt()
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(
                    "(SIGINT: the rankscope collector saved its profiling window and re-raised the interrupt; "
                    "the line interrupted is the one above the collector's frame)"
                )
            return exc
        if callable(prev):
            prev(signum, frame)  # a handler of the program's own
        elif prev == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        return None

    # ------------------------------------------------------------------ misc
    def _explicit_options(self) -> frozenset[str]:
        names = set(option_names())
        out = set()
        for key in self.config.explicit:
            if key.startswith("static_param."):
                k = key.split(".", 1)[1]
                if k in names:
                    out.add(k)
        return frozenset(out)

    def _report_once(self, key: str, message: str) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        log.warning("rankscope collector: %s", message)
        if self._watcher is not None:
            self._watcher.log(message)


def _files_of(w: _Window) -> list[str]:
    """The window's output files so far, relative to the window folder."""
    return [
        str(p.relative_to(w.folder)) if p.is_relative_to(w.folder) else str(p) for p in getattr(w.session, "files", [])
    ]


def _segments_of(w: _Window) -> dict[str, Any]:
    """``segments``: which steps each output folder holds, for backends that write one folder per segment."""
    segs = getattr(w.session, "segments", None)
    if segs is None:
        return {}
    return {
        "segments": [
            {"path": str(p.relative_to(w.folder)) if p.is_relative_to(w.folder) else str(p), "steps": steps}
            for p, steps in segs
        ]
    }


def _remove_empty_window(folder: Path) -> None:
    """Remove a window folder holding nothing but its sidecar (and its rank folder if left empty)."""
    from .sidecar import SIDECAR_NAME

    try:
        if {p.name for p in folder.iterdir()} <= {SIDECAR_NAME}:
            (folder / SIDECAR_NAME).unlink(missing_ok=True)
            folder.rmdir()
            if not any(folder.parent.iterdir()):
                folder.parent.rmdir()
    except OSError:
        pass


def _options_of(sp: Any) -> Any:
    from .config import ProfileOptions

    return ProfileOptions(**{f.name: getattr(sp, f.name) for f in dataclasses.fields(ProfileOptions)})
