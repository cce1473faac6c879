"""msprof's export: ``mindstudio_profiler_output/`` (``msprof --export=on``) and the older per-device
timelines (``device_{d}/timeline/``, CANN <= 7.0); docs/formats.md §3.2, §3.3, §3.6. msprof writes it
for its own ``PROF_*`` folders; MindSpore and torch_npu leave one inside theirs when their own parse
did not finish.

- ``op_summary_*.csv``: ``kernels`` (+ PMU columns -> ``kernel_metrics``)
- ``op_statistic_*``, ``api_statistic_*``, ``communication_statistic_*``: ``statistics``
- ``step_trace_*.csv``: ``steps`` (Iteration ID, end - iteration time .. end)
- ``task_time_*.csv``: ``kernels`` when there is no op_summary; ``slices`` when there is no msprof json
- ``npu_mem_*``, ``npu_module_mem_*``, ``memory_record_*`` (**KB**): ``memory_samples``
- ``operator_memory_*`` (**KB**): ``operator_memory``
- ``msprof_*.json`` (timeline): ``slices``, ``lanes``, ``counters``; ``comm_ops`` from the HCCL big ops; ``kernels``
  from the Ascend Hardware lanes when no CSV gives them
- ``device_{d}/timeline/msprof_{d}_{model}_{iter}.json`` (else ``task_time_*`` + ``hccl_*``): as the msprof json,
  times converted from the device's monotonic clock with ``start_info.{d}``; ``steps`` from the ``Iteration N`` events

Sliced exports (``{name}_slice_{n}_{ts}.csv|json``, one slice per million rows) are read in order of
``n`` as one file. Every msprof memory size is in KB (1024 bytes), times are µs strings parsed to
exact ns.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...messages import english, problem
from ..base import ReadContext
from ..common.csvfile import read_csv
from ..common.steps import steps_containing
from .kernels import comm_tasks, read_kernels
from .memory import read_memory_record_kb, read_module_mem_kb, read_npu_mem_kb, read_operator_memory_kb
from .names import DEVICE_DIR_RE, EXPORT_NAME_RE, LEGACY_TIMELINE_RE
from .prof import DeviceClock
from .summaries import read_api_statistic, read_comm_statistic, read_op_statistic
from .trace_view import AscendTrace

# kinds of mindstudio_profiler_output this version does not ingest, with the reason shown to the user
_NOT_INGESTED = {
    "msprof_tx": problem("ignored.msprof_tx"),
    "fusion_op": problem("ignored.fusion_op"),
    "static_op_mem": problem("ignored.static_op_mem_plan"),
    "aicpu": problem("ignored.aicpu"),
    "aicpu_mi": problem("ignored.aicpu_mi"),
    "dp": problem("ignored.dp"),
    "l2_cache": problem("ignored.l2_cache_msprof"),
}


STEP_TRACE_COLS = {
    "device": ("Device_id",),
    "iteration": ("Iteration ID",),
    "fp_start": ("FP Start(us)",),
    "bp_end": ("BP End(us)",),
    "end": ("Iteration End(us)",),
    "time": ("Iteration Time(us)",),
    "model": ("Model ID",),
}


TASK_TIME_COLS = {
    "device": ("Device_id",),
    "name": ("kernel_name",),
    "type": ("kernel_type",),
    "stream": ("stream_id", "Stream ID"),
    "task": ("task_id", "Task ID"),
    "dur": ("task_time(us)",),
    "start": ("task_start(us)",),
    "stop": ("task_stop(us)",),
}


@dataclass
class ExportFile:
    kind: str
    slice_no: int
    path: Path


class ExportState:
    """What the files of one msprof export share while they are read."""

    def __init__(self) -> None:
        self.next_kernel_id = 0  # sliced and several kernel files continue one numbering
        self.device_ids: set[int] = set()
        self.steps: list[tuple[int, int, int]] = []  # step_trace rows / iterations, for the kernels' steps


def read_export(ctx: ReadContext, st: ExportState, export: dict[str, list[ExportFile]]) -> None:
    """Read the files of a ``mindstudio_profiler_output/`` folder (also used for the PROF folder a
    MindSpore or torch_npu run left unparsed)."""
    has_summary = "op_summary" in export
    has_json = "msprof" in export
    # steps first, so the rows read after them (timeline kernels, communication) get their step
    order = sorted(export, key=lambda k: (k != "step_trace", k))
    for kind in order:
        files = []
        for f in export[kind]:
            if file_size(f.path) == 0:  # msprof leaves 0-byte files for kinds with no data
                ctx.ignore(f.path, problem("ignored.msprof_empty_kind"))
            else:
                files.append(f)
        if not files:
            continue
        ext = files[0].path.suffix
        if kind == "op_summary" and ext == ".csv":
            for f in files:
                st.next_kernel_id += read_kernels(
                    ctx,
                    f.path,
                    kind="op_summary",
                    first_kernel_id=st.next_kernel_id,
                    step_of=lambda ts: steps_containing(st.steps, ts),
                ).n
        elif kind == "op_statistic" and ext == ".csv":
            for f in files:
                read_op_statistic(ctx, f.path, kind="op_statistic")
        elif kind == "api_statistic" and ext == ".csv":
            for f in files:
                read_api_statistic(ctx, f.path, kind="api_statistic")
        elif kind == "communication_statistic" and ext == ".csv":
            for f in files:
                read_comm_statistic(ctx, f.path)
        elif kind == "step_trace" and ext == ".csv":
            for f in files:
                _read_step_trace(ctx, st, f.path)
        elif kind == "task_time" and ext == ".csv":
            for f in files:
                _read_task_time(ctx, st, f.path, kernels=not has_summary, slices=not has_json)
        elif kind == "npu_mem" and ext == ".csv":
            for f in files:
                st.device_ids |= read_npu_mem_kb(ctx, f.path)
        elif kind == "npu_module_mem" and ext == ".csv":
            for f in files:
                read_module_mem_kb(ctx, f.path)
        elif kind == "memory_record" and ext == ".csv":
            for f in files:
                read_memory_record_kb(ctx, f.path)
        elif kind == "operator_memory" and ext == ".csv":
            for f in files:
                read_operator_memory_kb(ctx, f.path)
        elif kind == "msprof" and ext == ".json":
            _read_timeline(ctx, st, [f.path for f in files], kernels=not has_summary and "task_time" not in export)
        else:
            base = kind.split(".")[0]
            if base == "step_trace" and ext == ".json":
                has_csv = any(x.path.suffix == ".csv" for x in export.get("step_trace", []))
                reason = problem("ignored.step_trace_json" if has_csv else "ignored.step_trace_json_no_csv")
            elif ext == ".json" and base != "msprof_tx":
                reason = problem("ignored.summary_json", kind=base)
            else:
                reason = _NOT_INGESTED.get(base) or problem("ignored.summary", kind=base)
            for f in files:
                ctx.ignore(f.path, reason)
            continue


def file_size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return -1


def export_files(files: Iterable[Path], out: Path) -> dict[str, list[ExportFile]]:
    """Files of the export folder grouped by kind, slices in order of their number."""
    groups: dict[tuple[str, str], list[ExportFile]] = defaultdict(list)
    for p in files:
        if p.parent != out:
            continue
        m = EXPORT_NAME_RE.match(p.name)
        if not m:
            continue
        n = int(m.group("n")) if m.group("n") is not None else -1
        groups[(m.group("kind"), m.group("ext"))].append(ExportFile(m.group("kind"), n, p))
    out_groups: dict[str, list[ExportFile]] = {}
    for (kind, ext), fs in sorted(groups.items()):
        fs.sort(key=lambda f: (f.slice_no, f.path.name))
        key = kind if kind not in out_groups else f"{kind}.{ext}"
        out_groups[key] = fs
    return out_groups


def _read_step_trace(ctx: ReadContext, st: ExportState, path: Path) -> None:
    with ctx.reading(path, "step_trace") as outcome:
        t = read_csv(path, "step_trace CSV", STEP_TRACE_COLS, required=("iteration", "end", "time"))
        outcome.warn_all(t.warnings)
        it = t.ints("iteration")
        end = t.ns_from_us("end")
        dur = t.ns_from_us("time")
        rows: dict[str, list[Any]] = {"step": [], "start_ns": [], "end_ns": [], "dur_ns": [], "source": []}
        for s, e, d in zip(it, end, dur):
            if s is None or e is None or d is None:
                continue
            rows["step"].append(s)
            rows["start_ns"].append(e - d)
            rows["end_ns"].append(e)
            rows["dur_ns"].append(d)
            rows["source"].append("msprof step_trace")
            st.steps.append((s, e - d, e))
        outcome.rows = ctx.write("steps", rows)
        skipped = t.n_rows - len(rows["step"])
        if skipped:
            outcome.warn(problem("rows_without_iteration", n=skipped))


def _read_task_time(ctx: ReadContext, st: ExportState, path: Path, kernels: bool, slices: bool) -> None:
    if not kernels and not slices:
        ctx.ignore(path, problem("ignored.task_time_read"))
        return
    with ctx.reading(path, "task_time") as outcome:
        t = read_csv(path, "task_time CSV", TASK_TIME_COLS, required=("type", "start", "dur"))
        outcome.warn_all(t.warnings)
        n = t.n_rows
        names = [nm if nm is not None else ty for nm, ty in zip(t.text("name"), t.text("type"))]
        types = t.text("type")
        dev = t.ints("device")
        st.device_ids.update(d for d in dev if d is not None)
        stream = t.ints("stream")
        ts = t.ns_from_us("start")
        dur = t.ns_from_us("dur")
        comm = comm_tasks(types, names)
        if kernels:
            first = st.next_kernel_id
            st.next_kernel_id += n
            outcome.rows += ctx.write(
                "kernels",
                {
                    "kernel_id": list(range(first, first + n)),
                    "name": names,
                    "core_type": types,
                    "is_communication": comm,
                    "device_id": dev,
                    "stream_id": stream,
                    "task_id": t.ints("task"),
                    "ts_ns": ts,
                    "dur_ns": dur,
                },
            )
        if slices:
            pid = [f"NPU {d}" if d is not None else "NPU" for d in dev]
            tid = [str(s) if s is not None else "" for s in stream]
            args = [
                json.dumps({"Task Type": ty, "Stream Id": s, "Task Id": k})
                for ty, s, k in zip(types, stream, t.ints("task"))
            ]
            outcome.rows += ctx.write(
                "slices",
                {
                    "pid": pid,
                    "tid": tid,
                    "name": names,
                    "category": ["task_time"] * n,
                    "ts_ns": ts,
                    "dur_ns": dur,
                    "event_id": list(range(n)),
                    "args": args,
                },
            )
            counts: dict[tuple[str, str], int] = defaultdict(int)
            for p, q in zip(pid, tid):
                counts[(p, q)] += 1
            keys = sorted(counts)
            ctx.write(
                "lanes",
                {
                    "pid": [k[0] for k in keys],
                    "tid": [k[1] for k in keys],
                    "process": ["Ascend Hardware"] * len(keys),
                    "lane": [f"Stream {k[1]}" for k in keys],
                    "lane_group": ["device"] * len(keys),
                    "n_slices": [counts[k] for k in keys],
                },
            )


def _read_timeline(ctx: ReadContext, st: ExportState, paths: list[Path], kernels: bool) -> None:
    trace = AscendTrace(ctx, device_tasks=kernels, timeline=True)
    for p in paths:
        trace.feed_file(p, "msprof timeline")
    _finish_timeline(st, trace)


def _finish_timeline(st: ExportState, trace: AscendTrace) -> None:
    staged = trace.close()
    trace.write_counters(staged)
    if trace.router.lane_counts:
        trace.ctx.write("lanes", trace.router.lane_rows())
    st.next_kernel_id += trace.write_timeline(st.steps, st.next_kernel_id)


@dataclass
class LegacyFile:
    kind: str
    device: int
    model: int
    iteration: int
    path: Path


def legacy_timelines(files: Iterable[Path], root: Path) -> list[LegacyFile]:
    """The per-device, per-iteration timelines (``device_{d}/timeline/*.json``) among ``files``."""
    out = []
    for p in files:
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            continue
        if len(rel) != 3 or rel[1] != "timeline" or not DEVICE_DIR_RE.match(rel[0]):
            continue
        m = LEGACY_TIMELINE_RE.match(p.name)
        if m:
            out.append(LegacyFile(m.group("kind"), int(m.group("d")), int(m.group("m")), int(m.group("i")), p))
    return sorted(out, key=lambda f: (f.device, f.model, f.iteration, f.kind))


def read_legacy(ctx: ReadContext, st: ExportState, files: list[LegacyFile], clocks: dict[int, DeviceClock]) -> None:
    """Per-iteration timelines: msprof_* holds the union of task_time_*, hccl_* and the iteration's
    step events, so the others are read only when msprof_* is missing."""
    by_dev: dict[int, list[LegacyFile]] = defaultdict(list)
    for f in files:
        by_dev[f.device].append(f)
    for dev, fs in sorted(by_dev.items()):
        st.device_ids.add(dev)
        clock = clocks.get(dev)
        if clock is None:
            ctx.meta.missing.append(english("missing.ascend.no_start_info", device=dev))
        have = {f.kind for f in fs}
        read_kinds = ("msprof",) if "msprof" in have else ("task_time", "hccl")
        trace = AscendTrace(ctx, device_tasks=True, timeline=True)
        for f in fs:
            if f.kind in read_kinds:
                trace.feed_file(f.path, f"legacy {f.kind} timeline", clock.offset_ns if clock is not None else 0)
            elif f.kind in ("task_time", "hccl", "step_trace"):
                ctx.ignore(
                    f.path,
                    problem("ignored.msprof_same_events", file=f"msprof_{f.device}_{f.model}_{f.iteration}.json"),
                )
            else:
                ctx.ignore(f.path, problem("ignored.ai_core_utilisation"))
        _finish_timeline(st, trace)
    ctx.meta.extra["legacy_timeline"] = True
