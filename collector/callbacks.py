"""Callbacks for training loops that expose step or epoch hooks instead of a loop you edit.

``StepCallback`` drives a :class:`~collector.Profiler` from ``on_step_begin``/``on_step_end`` hooks.
``StopAtStep(start_step, stop_step)`` and ``StopAtEpoch(start_epoch, stop_epoch)`` are the seeds'
MindSpore-style callbacks: they profile ``start..stop`` **inclusive**, with the step (epoch) numbers
the framework passes to the hooks. Epoch granularity is for data-sink mode, where the host only
regains control between epochs: one collector "step" is then one epoch (``ProfilerStep#N`` is
epoch N, the sidecar says ``granularity: epoch``).

The hooks accept either a plain number or a MindSpore ``run_context`` (anything with
``original_args()`` returning an object with ``cur_step_num`` / ``cur_epoch_num``), so the same
objects plug into MindSpore's ``Model.train(callbacks=[...])`` method names
(``on_train_step_begin``, ``on_train_step_end``, ``on_train_epoch_begin``, ``on_train_epoch_end``,
``on_train_end``) and into hand-written loops.
"""

from __future__ import annotations

from typing import Any

from .config import ProfilerConfig
from .profiler import Profiler
from .sources import load_config


def _number(arg: Any, attr: str) -> int | None:
    if arg is None:
        return None
    if isinstance(arg, int) and not isinstance(arg, bool):
        return arg
    orig = getattr(arg, "original_args", None)
    if callable(orig):
        v = getattr(orig(), attr, None)
        return int(v) if v is not None else None
    v = getattr(arg, attr, None)
    return int(v) if v is not None else None


class StepCallback:
    """Drive a Profiler from step hooks (``granularity='step'``) or epoch hooks (``'epoch'``)."""

    _attr = {"step": "cur_step_num", "epoch": "cur_epoch_num"}

    def __init__(self, config: Any = None, *, granularity: str = "step", profiler: Profiler | None = None):
        if granularity not in self._attr:
            raise ValueError("granularity must be 'step' or 'epoch'")
        self.granularity = granularity
        self.profiler = profiler or Profiler(config, granularity=granularity)

    # -- generic hooks
    def on_begin(self, n: Any = None) -> None:
        num = _number(n, self._attr[self.granularity])
        prof = self.profiler
        if not prof.started:
            prof.start(first_step=num if num is not None else 0)
        elif num is not None and num != prof.step_num:
            prof.sync_step(num)  # the framework skipped numbers (e.g. resumed training): follow it

    def on_end(self, n: Any = None, **scalars: Any) -> None:
        if not self.profiler.started:
            self.on_begin(n)
        self.profiler.step(**scalars)

    def on_train_end(self, *_: Any) -> None:
        self.profiler.stop()

    # -- plain names
    def on_step_begin(self, step: Any = None) -> None:
        self.on_begin(step)

    def on_step_end(self, step: Any = None, **scalars: Any) -> None:
        self.on_end(step, **scalars)

    def on_epoch_begin(self, epoch: Any = None) -> None:
        if self.granularity == "epoch":
            self.on_begin(epoch)

    def on_epoch_end(self, epoch: Any = None, **scalars: Any) -> None:
        if self.granularity == "epoch":
            self.on_end(epoch, **scalars)

    # -- MindSpore Callback method names
    def on_train_step_begin(self, run_context: Any) -> None:
        if self.granularity == "step":
            self.on_begin(run_context)

    def on_train_step_end(self, run_context: Any) -> None:
        if self.granularity == "step":
            self.on_end(run_context)

    def on_train_epoch_begin(self, run_context: Any) -> None:
        self.on_epoch_begin(run_context)

    def on_train_epoch_end(self, run_context: Any) -> None:
        self.on_epoch_end(run_context)


def _static(config: Any, start: int, stop: int) -> ProfilerConfig:
    if stop < start:
        from .errors import ConfigError

        raise ConfigError([f"stop ({stop}) is before start ({start})"], "callback")
    given = load_config(config).to_transport() if config is not None else {}
    sp = dict(given.get("static_param", {}), start_step=start, end_step=stop + 1)
    return ProfilerConfig.from_dict({**given, "profile_type": "static", "static_param": sp}, "callback")


class StopAtStep(StepCallback):
    """Profile steps ``start_step..stop_step`` inclusive, numbered as the framework's step hooks number them."""

    def __init__(self, start_step: int, stop_step: int, config: Any = None, **kwargs: Any):
        super().__init__(_static(config, start_step, stop_step), granularity="step", **kwargs)


class StopAtEpoch(StepCallback):
    """Profile epochs ``start_epoch..stop_epoch`` inclusive (data-sink mode: one collector step = one epoch)."""

    def __init__(self, start_epoch: int, stop_epoch: int, config: Any = None, **kwargs: Any):
        super().__init__(_static(config, start_epoch, stop_epoch), granularity="epoch", **kwargs)
