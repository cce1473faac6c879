"""Always-on step scalars: ``save_path/rank_{id}/rankscope_scalars.jsonl``, one JSON object per line.

``{"step": 12, "ts_ns": 1790000000000000000, "step_time_ns": 10234567, "scalars": {"loss": 2.31}}``

``ts_ns`` is the end of the step on the host clock (epoch ns, the clock Kineto and torch_npu
traces use), ``step_time_ns`` the wall time from the previous step boundary (collector overhead
excluded). Lines are written every ``collect_freq`` steps (and always for the first step seen),
each one flushed to the OS at once, so a crash loses at most the line being written.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, TextIO

SCALARS_NAME = "rankscope_scalars.jsonl"


def _clean(v: Any) -> Any:
    """A JSON-able number for a scalar: floats/ints as they are, tensors (detached) / numpy via float()."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    torch = sys.modules.get("torch")  # a tensor can only come from a loaded torch: never import it here
    if torch is not None and isinstance(v, torch.Tensor):
        v = v.detach()  # float() of a tensor requiring grad warns ("Converting a tensor with requires_grad=True")
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class ScalarsWriter:
    def __init__(self, path: Path, collect_freq: int = 1):
        self.path = path
        self.collect_freq = max(1, int(collect_freq))
        self._f: TextIO | None = None
        self._first = True
        self.dropped: set[str] = set()

    def due(self, step: int) -> bool:
        return self._first or step % self.collect_freq == 0

    def write(self, step: int, ts_ns: int, step_time_ns: int | None, scalars: dict[str, Any] | None = None) -> None:
        values: dict[str, Any] = {}
        for k, v in (scalars or {}).items():
            c = _clean(v)
            if c is None:
                self.dropped.add(str(k))
                continue
            values[str(k)] = c
        rec = {"step": step, "ts_ns": ts_ns, "step_time_ns": step_time_ns, "scalars": values}
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "a", encoding="utf-8")
        self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._f.flush()
        self._first = False

    def close(self) -> None:
        if self._f is not None:
            try:
                self._f.close()
            finally:
                self._f = None


def default_path(save_path: str | os.PathLike[str], rank: int) -> Path:
    return Path(save_path) / f"rank_{rank}" / SCALARS_NAME
