"""Kineto / torch.profiler chrome traces (``*.json``, ``*.json.gz``), new and old category names.

One pass over the events (streamed by ``chrome.stream``, routed by ``chrome.router``, taken by
``picker``) puts them in the tables:

- every X / i event -> ``slices`` (timeline), M events -> ``lanes``;
- ``cpu_op`` / ``user_annotation`` / old ``Operator`` -> ``operators`` (self time from nesting);
- ``ProfilerStep#N`` -> ``steps``;
- ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` (old ``Kernel``, ``Memcpy``, ``Memset``) -> ``kernels``;
- collectives: NCCL kernels carrying ``Collective name``, else ``nccl:*`` / ``gloo:*`` annotations
  (sized from ``Input Dims`` x dtype), with groups from ``record_param_comms`` / ``pg_config``;
- ``[memory]`` instant events -> ``memory_samples`` and, paired by address, ``operator_memory``;
- C events -> ``counters``.

Speed: each block of events is decoded by msgspec into small structs (``args`` kept as raw JSON),
its fields are gathered once into Arrow columns and every table takes its rows through masks;
there is no per-event Python loop except over rare kinds (metadata, counters, step markers).

Rows needing information from elsewhere in the file (step ids, self time, the time base that
older Kineto writes after the events) are staged (``common.spill``) and finished at the end with
numpy by ``finish`` (a sort for self time, binary searches for steps and memory blocks), read back
batch by batch, so memory stays bounded by the block size plus a few integer columns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem
from ..base import PART_READERS, SIDECAR_NAME, ReadContext, register
from ..chrome.router import EventRouter
from ..chrome.stream import Event, TraceStream, open_binary, sniff
from ..common.spill import SpillStage
from . import parts
from .finish import check_rank, finish
from .picker import ROUTE, KinetoPicker

TRACE_SUFFIXES = (".json", ".json.gz")
PART_READERS["kineto"] = parts  # one big trace: read by several processes (kineto.parts)


def peek_rank(path: Path) -> tuple[int | None, int | None]:
    """(rank, world_size) from distributedInfo near the start of a trace, without parsing it."""
    try:
        with open_binary(path) as f:
            head = f.read(1 << 20)
    except (OSError, InputError):
        return None, None
    return _rank_from_bytes(head)


_DIST_RE = re.compile(rb'"distributedInfo"\s*:\s*\{(.{0,4000}?)\}', re.S)


_RANK_RE = re.compile(rb'"rank"\s*:\s*(-?\d+)')


_WS_RE = re.compile(rb'"world_size"\s*:\s*(\d+)')


def _rank_from_bytes(head: bytes) -> tuple[int | None, int | None]:
    m = _DIST_RE.search(head)
    if not m:
        return None, None
    body = m.group(1)
    r = _RANK_RE.search(body)
    w = _WS_RE.search(body)
    return (int(r.group(1)) if r else None), (int(w.group(1)) if w else None)


def detect(path: Path) -> str | None:
    """Discovery's question: 'kineto' for a Chrome trace (an object with traceEvents, or any other
    Chrome trace in JSON array form); 'ignore:<reason>' for an unrelated JSON file; the problem that
    stops a trace-like file from being read; None when the file is not JSON by name."""
    if not path.name.endswith(TRACE_SUFFIXES):
        return None
    verdict = sniff(path)
    if verdict in ("object", "array"):
        return "kineto"
    return verdict


@register("kineto")
def read_kineto(ctx: ReadContext) -> None:
    plan = ctx.plan
    stage = SpillStage(ctx.scratch_dir())
    picker = KinetoPicker(ctx, stage)
    router = EventRouter(ROUTE, picker, picker.write_slices, ctx.note)
    late_base: dict[int, int] = {}
    metas: list[dict[str, Any]] = []
    # the collector's window sidecar belongs to the collection (its status) but is not a trace
    traces = [p for p in plan.files if p.suffix in (".json", ".gz") and p.name != SIDECAR_NAME]
    picker.files = sorted(traces)
    for file_idx, path in enumerate(picker.files):
        with ctx.reading(path, "kineto") as outcome:
            router.start_file()
            ts = TraceStream(path, read_ahead=ctx.cores > 1)
            base = 0
            direct = True
            first_block = True
            for events in ts.blocks():
                if first_block:
                    base = int(ts.header.get("baseTimeNanoseconds") or 0)
                    direct = "baseTimeNanoseconds" in ts.header or not _relative_times(events)
                    first_block = False
                picker.file_idx, picker.direct_slices = file_idx, direct
                router.route(events, base)
            if first_block:  # no events at all
                base = int(ts.header.get("baseTimeNanoseconds") or 0)
            meta = ts.metadata
            if "baseTimeNanoseconds" not in ts.header:
                late_base[file_idx] = int(meta.get("baseTimeNanoseconds") or 0)
            metas.append(meta)
            outcome.rows = ts.n_events
            outcome.sha256 = ts.sha256
            outcome.warn_all(ts.warnings)
            if ts.n_events == 0:
                raise InputError(str(path), problem("no_events"))
            check_rank(ctx, path, meta, outcome)
    staged = stage.close()
    if not staged and router.event_base == 0 and not ctx.writer.total_rows:
        return
    finish(ctx, router, picker, staged, late_base, metas)


def _relative_times(events: list[Event]) -> bool:
    """True when ts values look relative (newer Kineto with a time base somewhere in the file)."""
    for e in events:
        if isinstance(e.ts, (int, float)) and e.ph in ("X", "i"):
            return e.ts < 1e14  # absolute epoch µs are ~1.6e15
    return False
