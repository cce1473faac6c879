"""The Hugging Face Trainer callback, with the real transformers Trainer (CPU, tiny model, in a child process).

transformers and accelerate install without pulling another torch (checked with pip --dry-run);
the test is skipped where they are not installed (the `hf` extra).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("accelerate") is None,
    reason="transformers/accelerate not installed (pip install -e '.[hf]')",
)

SCRIPT = r"""
import json, sys
import torch, torch.nn as nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments
from collector.hf import RankscopeTrainerCallback

class DS(Dataset):
    def __len__(self): return 48
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(16, generator=g), "labels": torch.tensor(i % 4)}

class M(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(16, 4)
    def forward(self, x, labels=None):
        logits = self.l(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

out = sys.argv[1]
args = TrainingArguments(output_dir=out + "/hf", per_device_train_batch_size=8, max_steps=6, logging_steps=2,
                         report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
cb = RankscopeTrainerCallback(
    {"backend": "torch", "static_param": {"start_step": 2, "end_step": 4, "save_path": out + "/prof"}}
)
trainer = Trainer(model=M(), args=args, train_dataset=DS(), callbacks=[cb])
trainer.train()
print("LOG_HISTORY " + json.dumps(trainer.state.log_history))
"""


def test_trainer_callback_profiles_optimizer_steps_and_records_logged_scalars(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    history = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("LOG_HISTORY "))[12:])
    win = tmp_path / "prof" / "rank_0" / "window_step2"
    side = json.loads((win / "rankscope_window.json").read_text())
    assert (side["status"], side["captured_steps"]) == ("complete", [2, 3])
    steps = []
    for p in sorted(win.glob("*.pt.trace.json")):
        steps += [
            e["name"] for e in json.loads(p.read_text())["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")
        ]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    lines = [json.loads(x) for x in (tmp_path / "prof" / "rank_0" / "rankscope_scalars.jsonl").read_text().splitlines()]
    timed = [r["step"] for r in lines if r["step_time_ns"] is not None]
    assert timed == [0, 1, 2, 3, 4, 5]  # every optimizer step of max_steps=6
    logged = {r["step"]: r["scalars"] for r in lines if r["step_time_ns"] is None}
    # the Trainer logs at global_step 2, 4, 6: the collector's steps 1, 3, 5
    expect = {h["step"] - 1: h for h in history if "loss" in h}
    assert sorted(logged) == sorted(expect) == [1, 3, 5]
    for step, rec in logged.items():
        assert rec["loss"] == pytest.approx(expect[step]["loss"])
        assert rec["learning_rate"] == pytest.approx(expect[step]["learning_rate"])
        assert "epoch" not in rec and "train_runtime" not in rec
