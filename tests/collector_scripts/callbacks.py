"""Real CPU training driven through the collector's callbacks (run as a process by the tests).

    python callbacks.py OUT_DIR

- StopAtStep(3, 4) in a hand-written loop whose hooks get 1-based step numbers (steps 3 and 4);
- StopAtEpoch(2, 3) with MindSpore-style ``run_context`` objects (``original_args().cur_epoch_num``,
  1-based), one "step" per epoch, as in data-sink mode.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn as nn

from collector import StopAtEpoch, StopAtStep


def batch_step(model: nn.Module, opt: torch.optim.Optimizer) -> float:
    x = torch.randn(8, 16)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    cb = StopAtStep(3, 4, config={"backend": "torch", "static_param": {"save_path": str(out / "steps")}})
    for step in range(1, 7):  # a framework that numbers steps from 1
        cb.on_step_begin(step)
        loss = batch_step(model, opt)
        cb.on_step_end(step, loss=loss)
    cb.on_train_end()

    class RunContext:
        def __init__(self, epoch: int) -> None:
            self.epoch = epoch

        def original_args(self) -> SimpleNamespace:
            return SimpleNamespace(cur_epoch_num=self.epoch, cur_step_num=self.epoch * 3)

    ecb = StopAtEpoch(2, 3, config={"backend": "torch", "static_param": {"save_path": str(out / "epochs")}})
    for epoch in range(1, 5):
        ctx = RunContext(epoch)
        ecb.on_train_epoch_begin(ctx)
        for _ in range(3):
            ecb.on_train_step_end(ctx)  # step hooks are ignored at epoch granularity
            batch_step(model, opt)
        ecb.on_train_epoch_end(ctx)
    ecb.on_train_end(None)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
