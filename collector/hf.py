"""Hugging Face ``Trainer`` callback: ``Trainer(..., callbacks=[RankscopeTrainerCallback(config)])``.

Imports transformers (this module is only imported when the callback is asked for). Steps are
optimizer steps: the collector's step N is the step after which ``state.global_step`` is N + 1,
so a run resumed at ``global_step`` G starts counting at G. Numeric values the Trainer logs
(``loss``, ``learning_rate``, ``grad_norm``...) are added to the step scalars of the step they
were logged after; the step wall time is recorded for every step.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from .profiler import Profiler


class RankscopeTrainerCallback(TrainerCallback):  # type: ignore[misc]
    def __init__(self, config: Any = None, *, profiler: Profiler | None = None, log_scalars: bool = True):
        self.profiler = profiler or Profiler(config)
        self.log_scalars = log_scalars

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.profiler.start(first_step=int(state.global_step))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.profiler.step_num != state.global_step:
            self.profiler.sync_step(int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.profiler.step()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not self.log_scalars or not logs or state.global_step < 1 or "train_runtime" in logs:  # not the end summary
            return
        values = {
            k: v for k, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "epoch"
        }
        if values:
            self.profiler.record_scalars(int(state.global_step) - 1, **values)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.profiler.stop()
