"""One big Kineto trace read by several processes at once, each a byte range of the file.

A collection with a single uncompressed trace in torch.profiler's pretty layout, its time base in
the header, is cut at event boundaries (``chrome.stream.split_points``). Each range is read by a
worker like a file of its own: its events get their file-order ids (a later range counts the events
before it in the bytes, ``events_before``), its slices go to Parquet at once, everything that needs
the whole file (operators' self time, steps, memory pairing, ...) is staged to files. ``finish``
then checks that every range began where the ranges before it ended (the decoded counts against the
counted ones: otherwise the caller reads the trace whole), merges what the ranges saw (lanes,
groups, what they hold) and finishes the staged rows as one file's.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...messages import problem
from ...store import scratch_folder
from ..base import SIDECAR_NAME, CollectionPlan, ReadContext
from ..chrome.lanes import LaneInfo
from ..chrome.router import EventRouter
from ..chrome.stream import TraceStream, events_before, split_points
from ..common.spill import SpillStage, Staged
from .finish import check_rank
from .finish import finish as finish_file
from .picker import ROUTE, KinetoPicker

SPLIT_BYTES = 192 << 20  # a trace smaller than this is read whole: the ranges' fixed costs would not pay
_HASH_BLOCK = 8 << 20


class PartsMismatch(Exception):
    """The ranges did not meet where they were cut (the layout was not what it looked like)."""


def _trace(plan: CollectionPlan) -> Path | None:
    traces = [p for p in plan.files if p.suffix in (".json", ".gz") and p.name != SIDECAR_NAME]
    return traces[0] if len(traces) == 1 else None


def split(plan: CollectionPlan, parts: int, store_path: str) -> list[dict[str, Any]] | None:
    """The ranges of the collection's trace (specs for ``read``), or None when it is read whole; the
    parts' staged rows go to a scratch folder in the store (``store.scratch_folder``)."""
    path = _trace(plan)
    if path is None or parts < 2 or path.stat().st_size < SPLIT_BYTES:
        return None
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    if b'"baseTimeNanoseconds"' not in head:  # a time base written after the events: read whole
        return None
    points = split_points(path, parts)
    if points is None:
        return None
    scratch = str(scratch_folder(store_path))
    ends: list[int | None] = [*points[1:], None]
    return [
        {"index": i, "path": str(path), "start": a, "end": b, "scratch": scratch}
        for i, (a, b) in enumerate(zip(points, ends))
    ]


def read(ctx: ReadContext, spec: dict[str, Any]) -> dict[str, Any]:
    """Read one range: slices to Parquet, the rest staged to files; returns what ``finish`` merges."""
    path = Path(spec["path"])
    start, end = int(spec["start"]), spec["end"]
    folder = Path(tempfile.mkdtemp(prefix=f"part{spec['index']}-", dir=spec["scratch"]))
    stage = SpillStage(folder, hold_bytes=0)
    picker = KinetoPicker(ctx, stage)
    router = EventRouter(ROUTE, picker, picker.write_slices, ctx.note)
    header = _header(path)
    base = int(header.get("baseTimeNanoseconds") or 0)
    router.event_base = 0 if start == 0 else events_before(path, start)
    first_id = router.event_base
    digest: dict[str, str] = {}
    hasher = None
    if start == 0:  # the first range hashes the whole file meanwhile (hashlib releases the GIL)
        hasher = threading.Thread(target=_sha256, args=(path, digest), name="sha256", daemon=True)
        hasher.start()
    ts = TraceStream(path, read_ahead=ctx.cores > 1)
    try:
        for events in ts.range_blocks(start, end):
            router.route(events, base)
    finally:
        if hasher is not None:
            hasher.join()
    return {
        "index": spec["index"],
        "first_id": first_id,
        "n_events": ts.n_events,
        "header": ts.header if start == 0 else {},
        "tail": ts.tail if end is None else {},
        "warnings": list(ts.warnings),
        "sha256": digest.get("sha256"),
        "lanes": router.lanes,
        "lane_counts": router.lane_counts,
        "lane_cats": router.lane_cats,
        "has_stacks": picker.has_stacks,
        "has_shapes": picker.has_shapes,
        "comm_kernel_rows": picker.comm_kernel_rows,
        "groups": picker.groups,
        "staged": {name: st.paths for name, st in stage.close().items()},
    }


def finish(ctx: ReadContext, states: list[dict[str, Any]]) -> None:
    """Merge the ranges and finish them as one file; ``PartsMismatch`` when they did not meet."""
    states = sorted(states, key=lambda s: s["index"])
    seen = 0
    for s in states:
        if s["first_id"] != seen:
            raise PartsMismatch(f"range {s['index']} began at event {s['first_id']}, the ranges before held {seen}")
        seen += s["n_events"]
    path = _trace(ctx.plan)
    assert path is not None
    stage = SpillStage(ctx.scratch_dir())
    picker = KinetoPicker(ctx, stage)
    picker.files = [path]
    router = EventRouter(ROUTE, picker, picker.write_slices, ctx.note)
    router.event_base = seen
    staged: dict[str, list[Staged]] = {}
    for s in states:
        _merge_lanes(router.lanes, s["lanes"])
        router.lane_counts.update(s["lane_counts"])
        for key, cats in s["lane_cats"].items():
            router.lane_cats.setdefault(key, Counter()).update(cats)
        picker.has_stacks |= s["has_stacks"]
        picker.has_shapes |= s["has_shapes"]
        picker.comm_kernel_rows += s["comm_kernel_rows"]
        for name, g in s["groups"].items():
            picker._remember_group(name, g.get("group_id"), g.get("global_ranks"))
        for name, paths in s["staged"].items():
            staged.setdefault(name, []).append(Staged(paths=paths))
    meta = {**states[0]["header"], **states[-1]["tail"]}
    with ctx.reading(path, "kineto") as outcome:
        outcome.rows = seen
        outcome.sha256 = states[0]["sha256"]
        outcome.warn_all([w for s in states for w in s["warnings"]])
        if seen == 0:
            raise InputError(str(path), problem("no_events"))
        check_rank(ctx, path, meta, outcome)
    if seen:
        finish_file(ctx, router, picker, {k: Staged.joined(v) for k, v in staged.items()}, {}, [meta])


def _merge_lanes(into: LaneInfo, part: LaneInfo) -> None:
    """``part``'s names after ``into``'s, as if its M events came later in the file."""
    into.process_names.update(part.process_names)
    into.process_labels.update(part.process_labels)
    into.thread_sort.update(part.thread_sort)
    into.process_sort.update(part.process_sort)
    for key, name in part.thread_names.items():
        old = into.thread_names.get(key)
        if old is None or len(name) > len(old):
            into.thread_names[key] = name


def _header(path: Path) -> dict[str, Any]:
    """The trace object's keys before its event list (read from the file's first block)."""
    ts = TraceStream(path)
    blocks = ts.blocks()
    try:
        next(blocks, None)
    finally:
        blocks.close()
    return ts.header


def _sha256(path: Path, out: dict[str, str]) -> None:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(_HASH_BLOCK):
            h.update(b)
    out["sha256"] = h.hexdigest()
