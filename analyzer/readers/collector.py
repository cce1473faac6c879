"""Files written by our own collector: per-rank step scalars and sidecars of windows with no data.

``rankscope_scalars.jsonl`` holds one JSON object per line, appended every ``collect_freq`` steps:
``{"step": 12, "ts_ns": 1790000000000000000, "step_time_ns": 10234567, "scalars": {"loss": 2.31}}``.
A line cut by a crash (the last one) is dropped with a warning.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..messages import english, problem
from .base import SIDECAR_NAME, CollectionPlan, ReadContext, register
from .common.jsonfile import json_value

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
        first_bad = 0
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec: Any = json_value(line)
                step = int(rec["step"])
                t = rec.get("ts_ns")  # a value int64 cannot hold is named by the writer
                row = [] if rec.get("step_time_ns") is None else [("step_time_ns", float(rec["step_time_ns"]))]
                scalars = rec.get("scalars") or {}
                row += [
                    (str(k), float(v))
                    for k, v in scalars.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                ]
            except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
                bad += 1
                first_bad = first_bad or i + 1
                if i == len(lines) - 1:
                    outcome.warn(problem("collector_incomplete"))
                continue
            for name, value in row:
                steps.append(step)
                ts.append(t)
                names.append(name)
                values.append(value)
        if bad > 1 or (bad == 1 and outcome.status == "ok"):
            outcome.warn(problem("collector_bad_lines", n=bad, line=first_bad))
        if not values:
            raise InputError(str(path), problem("collector_no_steps"))
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
    ctx.meta.missing.append(english("missing.collector.no_output", status=sc.get("status", "unknown")))


def segment_steps(plan: CollectionPlan) -> list[int] | None:
    """The steps the collector's sidecar says this collection's folder holds (its ``segments``:
    one folder per step, or per window, for backends that write a folder per segment), or None."""
    sc = plan.sidecar or {}
    segs = sc.get("segments")
    if not isinstance(segs, list):
        return None
    root = plan.root.as_posix().rstrip("/")
    for seg in segs:
        if not isinstance(seg, dict) or not isinstance(seg.get("path"), str):
            continue
        path = seg["path"].strip("/")
        if path and (root == path or root.endswith("/" + path)):
            steps = seg.get("steps")
            if isinstance(steps, list) and all(isinstance(s, int) for s in steps):
                return sorted(steps)
    return None


NO_STEP_SENTENCE = "no step"  # how the producers' sentences about missing step markers begin


def steps_from_sidecar(ctx: ReadContext) -> None:
    """A collection whose producer wrote no step markers (MindSpore on CPU) while the collector's
    sidecar says which step its folder holds: that step spans the collection's events (``steps``
    row with source ``collector``, which the analyses use only where the producer gave none)."""
    if ctx.writer.has("steps") or ctx.meta.status == "unparsed":
        return
    steps = segment_steps(ctx.plan)
    if not steps:
        return
    lo, hi = ctx.writer.start_ns, ctx.writer.end_ns
    if len(steps) != 1 or lo is None or hi is None:
        ctx.meta.missing.append(english("missing.collector.no_markers", first=steps[0], last=steps[-1]))
        return
    ctx.write("steps", {"step": steps, "start_ns": [lo], "end_ns": [hi], "dur_ns": [hi - lo], "source": ["collector"]})
    ctx.meta.capabilities.add("steps")
    ctx.meta.missing[:] = [s for s in ctx.meta.missing if not s.lower().startswith(NO_STEP_SENTENCE)]
    ctx.meta.missing.append(english("missing.collector.one_step", step=steps[0]))


def sidecar_sentences(ctx: ReadContext) -> None:
    """A folder of a collector window that the sidecar does not list among its segments: the job
    died while the profiler was writing that step (``os._exit``, a kill): say so, instead of the
    producer's sentences about a folder it could not parse."""
    sc = ctx.plan.sidecar or {}
    segs = sc.get("segments")
    if not isinstance(segs, list) or segment_steps(ctx.plan) is not None:
        return
    captured = sc.get("captured_steps") or []
    after = english("missing.part.after_step", step=max(captured)) if captured else ""
    why = english("missing.part.comma_reason", reason=str(sc["reason"])) if sc.get("reason") else ""
    ctx.meta.missing.insert(
        0,
        english(
            "missing.collector.not_completed", n=len(segs), after=after, status=sc.get("status", "unknown"), why=why
        ),
    )
