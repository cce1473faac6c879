"""MindSpore ``Model.train`` callback: ``model.train(epochs, data, callbacks=[collector.mindspore_callback(config)])``.

Imports MindSpore (this module is only imported when the callback is asked for): ``Model.train``
accepts only ``mindspore.train.Callback`` instances, so the collector's
:class:`~collector.callbacks.StepCallback` is mixed into one. Step numbers are MindSpore's
``cur_step_num`` (counted from 1), epoch numbers its ``cur_epoch_num``: a static window
``[start_step, end_step)`` and a dynamic ``{"start_step": S, "stop_step": E}`` (MindSpore's
meaning, both inclusive) select the steps MindSpore's own callbacks would.

Non-sink mode: one collector step per training step (``granularity="step"``). Data-sink mode:
the host regains control only once per sink, so use ``granularity="epoch"`` (one collector step
per epoch, ``ProfilerStep#N`` = epoch N). The loss MindSpore hands to ``step_end``
(``cb_params.net_outputs``) is recorded as the step scalar ``loss``.
"""

from __future__ import annotations

from typing import Any

from mindspore.train import Callback

from .callbacks import StepCallback, _static
from .profiler import Profiler


def _loss(run_context: Any) -> dict[str, Any]:
    try:
        out = run_context.original_args().net_outputs
    except AttributeError:
        return {}
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    try:
        return {"loss": float(out.asnumpy()) if hasattr(out, "asnumpy") else float(out)}
    except (TypeError, ValueError):
        return {}


class RankscopeMindSporeCallback(StepCallback, Callback):  # type: ignore[misc]
    """A :class:`StepCallback` that ``Model.train`` accepts."""

    def __init__(self, config: Any = None, *, granularity: str = "step", profiler: Profiler | None = None):
        StepCallback.__init__(self, config, granularity=granularity, profiler=profiler)

    def on_train_step_end(self, run_context: Any) -> None:
        if self.granularity == "step":
            self.on_end(run_context, **_loss(run_context))

    def on_train_epoch_end(self, run_context: Any) -> None:
        if self.granularity == "epoch":
            self.on_end(run_context, **_loss(run_context))


def callback(
    config: Any = None, *, granularity: str = "step", start: int | None = None, stop: int | None = None
) -> RankscopeMindSporeCallback:
    """A ``Model.train`` callback running ``config``; with ``start``/``stop``: profile steps (or epochs,
    ``granularity="epoch"``) ``start..stop`` inclusive, as MindSpore's ``StopAtStep``/``StopAtEpoch``."""
    if (start is None) != (stop is None):
        raise ValueError("give both start and stop, or neither")
    if start is not None and stop is not None:
        config = _static(config, start, stop)
    return RankscopeMindSporeCallback(config, granularity=granularity)
