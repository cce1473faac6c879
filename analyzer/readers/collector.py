"""Files written by our own collector: per-rank step scalars and sidecars of windows with no data.

``rankscope_scalars.jsonl`` holds one JSON object per line, appended every ``collect_freq`` steps:
``{"step": 12, "ts_ns": 1790000000000000000, "step_time_ns": 10234567, "scalars": {"loss": 2.31}}``.
A line cut by a crash (the last one) is dropped with a warning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .base import SIDECAR_NAME, ReadContext, register

SCALARS_NAME = "rankscope_scalars.jsonl"  # the collector's per-step scalars of one rank
RANK_DIR_RE = re.compile(r"^rank_(\d+)$")  # the collector's rank_{id}/ folders


def detect(path: Path) -> str | None:
    """Discovery's question: 'collector_sidecar' / 'collector_scalars' for the collector's own files."""
    if path.name == SIDECAR_NAME:
        return "collector_sidecar"
    if path.name == SCALARS_NAME:
        return "collector_scalars"
    return None


@register("collector_scalars")
def read_scalars(ctx: ReadContext) -> None:
    path = ctx.plan.files[0]
    with ctx.reading(path, "collector_scalars") as outcome:
        steps: list[int] = []
        ts: list[int | None] = []
        names: list[str] = []
        values: list[float] = []
        bad = 0
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec: Any = json.loads(line)
                step = int(rec["step"])
            except (ValueError, KeyError, TypeError):
                bad += 1
                if i == len(lines) - 1:
                    outcome.warn("last line is incomplete (the job stopped while writing it); dropped")
                continue
            t = rec.get("ts_ns")
            if rec.get("step_time_ns") is not None:
                steps.append(step)
                ts.append(t)
                names.append("step_time_ns")
                values.append(float(rec["step_time_ns"]))
            for k, v in (rec.get("scalars") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    steps.append(step)
                    ts.append(t)
                    names.append(str(k))
                    values.append(float(v))
        if bad > 1 or (bad == 1 and outcome.status == "ok"):
            outcome.warn(f"{bad} unreadable line(s) skipped")
        if not values:
            raise InputError(str(path), "no step records")
        outcome.rows = ctx.write("scalars", {"step": steps, "ts_ns": ts, "name": names, "value": values})
    ctx.meta.capabilities.add("scalars")
    ctx.meta.producer_version = "rankscope collector"


@register("collector_empty")
def read_empty_window(ctx: ReadContext) -> None:
    """A window whose sidecar exists but whose profiler wrote nothing (killed before any export)."""
    sc = ctx.plan.sidecar or {}
    with ctx.reading(ctx.plan.files[0], "collector_sidecar"):
        pass
    ctx.meta.status = "partial"
    ctx.meta.missing.append(
        f"profiling window started (status {sc.get('status', 'unknown')}) but no profiler output was written"
    )
