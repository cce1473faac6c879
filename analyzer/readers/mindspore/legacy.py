"""Legacy MindSpore profiler output (≤ 2.2, still written by 2.3/2.4): flat files suffixed with the
rank in a ``profiler/`` folder (docs/formats.md §2.3). One collection per rank suffix.

- ``output_timeline_data_{r}.txt`` (``op_name, stream_id, start_time(ms -> us), duration(ms)``); ``kernels``,
  ``slices``/``lanes`` (Ascend Hardware, one lane per stream); op type, task id, block dim and tensor info joined from
  ``framework_raw_{r}.csv`` by full op name
- ``aicpu_intermediate_{r}.csv`` (``run_start``/``run_end`` µs): ``kernels`` and slices of the AI CPU lane
- ``ascend_timeline_display_{r}.json`` / ``timeline_display_{r}.json``: read only when ``output_timeline_data`` is
  missing: its times are relative to the first op
- ``step_trace_raw_{r}_detail_time.csv`` (device **syscnt ticks**): ``steps`` (ticks x 10 ns: the 100 MHz system
  counter of Ascend 910, or the ``hwts_frequency`` of a ``PROF_*`` info.json next to it)
- ``aicore_intermediate_{r}_type.csv`` (ms): ``statistics`` kind ``op_statistic``
- ``aicore_intermediate_{r}_detail.csv`` (ms, average per op): ``statistics`` kind ``op_detail``
- ``cpu_*_{r}`` host-CPU files: see mindspore_cpu
- ``operator_memory_{r}.csv`` (MB totals, KB sizes): ``operator_memory``
- ``profiler_info_{r}.json`` (legacy: ``rank_id`` string, ``rank_size``): collection metadata

Times stay on the device clock the files use (``start_time(ms)`` of the device): these files carry
no wall-clock reference, and the collection says so.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from itertools import compress, repeat
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import english, problem
from ...units import fit_ns, scaled_int
from ..ascend.prof import prof_hwts_hz
from ..base import FileOutcome, ReadContext, register
from ..chrome.columns import Codes, decode_args, durations_ns, field_values, id_column, raw_json_column, times_ns
from ..chrome.stream import Event, TraceStream
from ..common.cells import decimal_cells_to_ns, decimal_text_to_ns
from ..common.csvfile import read_csv
from ..common.jsonfile import json_value, load_json
from .host import (
    cpu_files,
    read_memory_record,
    read_op_detail_info,
    read_op_type_info,
    write_cpu_ops_from_timestamps,
)

# legacy flat files: {base}_{rank}[{tail}].{ext}
LEGACY_FILE_RE = re.compile(
    r"^(?P<base>aicore_intermediate|aicpu_intermediate|framework_raw|output_timeline_data|step_trace_raw|"
    r"ascend_timeline_display|ascend_timeline_summary|timeline_display|timeline_summary|gpu_timeline_display|"
    r"gpu_timeline_summary|flops|flops_summary|flops_scope|minddata_aicpu|minddata_cpu_utilization|"
    r"minddata_pipeline_raw|minddata_pipeline_summary|pipeline_profiling|dataset_iterator_profiling|"
    r"device_queue_profiling|output_op_compute_time|output_op_compute_time_detail|output_format_data_hwts|"
    r"output_data_preprocess_aicpu|min_cycle_counter|dynamic_shape_info|parallel_strategy|operator_memory|"
    r"hccl_raw|profiler_info|cpu_ms_memory_record|cpu_op_type_info|cpu_op_detail_info|cpu_op_execute_timestamp|"
    r"cpu_framework|dataset|output_task_time)"
    r"_(?P<rank>\d+)(?P<tail>_detail_time|_detail|_type)?\.(?P<ext>csv|txt|json)$"
)
# files that make a rank's folder a profile (the others only add to it)
CORE_BASES = {
    "aicore_intermediate",
    "framework_raw",
    "output_timeline_data",
    "step_trace_raw",
    "ascend_timeline_display",
    "timeline_display",
    "cpu_op_execute_timestamp",
    "cpu_op_type_info",
    "aicpu_intermediate",
}
SYSCNT_HZ_DEFAULT = 100_000_000  # Ascend 910 system counter

_NOT_INGESTED = {
    "flops": problem("ignored.flops"),
    "flops_summary": problem("ignored.flops_summary"),
    "flops_scope": problem("ignored.flops_scope"),
    **dict.fromkeys(
        (
            "minddata_aicpu",
            "minddata_cpu_utilization",
            "minddata_pipeline_raw",
            "minddata_pipeline_summary",
            "pipeline_profiling",
            "dataset_iterator_profiling",
            "device_queue_profiling",
            "dataset",
        ),
        problem("ignored.data_pipeline"),
    ),
    "output_op_compute_time": problem("ignored.text_of_aicore"),
    "output_op_compute_time_detail": problem("ignored.text_of_aicore"),
    "output_format_data_hwts": problem("ignored.hwts"),
    "output_data_preprocess_aicpu": problem("ignored.text_of_aicpu"),
    "output_task_time": problem("ignored.task_list"),
    "min_cycle_counter": problem("ignored.min_cycle"),
    "dynamic_shape_info": problem("ignored.dynamic_shape"),
    "parallel_strategy": problem("ignored.parallel_strategy"),
    "hccl_raw": problem("ignored.hccl_raw"),
    "ascend_timeline_summary": problem("ignored.timeline_summary"),
    "timeline_summary": problem("ignored.timeline_summary"),
    "gpu_timeline_summary": problem("ignored.timeline_summary"),
    "gpu_timeline_display": problem("ignored.gpu_timeline"),
}

FRAMEWORK_COLS = {
    "task": ("task_id",),
    "stream": ("stream_id",),
    "block": ("block_dim",),
    "full": ("full_op_name", "full_kernel_name"),
    "type": ("op_type", "kernel_type"),
    "info": ("op_info",),
}
AICORE_TYPE_COLS = {
    "type": ("op_type", "kernel_type"),
    "total": ("total_time", "execution_time"),
    "count": ("execution_frequency",),
    "percent": ("percent",),
}
AICORE_DETAIL_COLS = {
    "name": ("full_op_name", "full_kernel_name", "full_kernel_time"),
    "time": ("task_duration", "execution_time"),
    "count": ("execution_frequency",),
    "type": ("task_type",),
}
AICPU_COLS = {
    "type": ("kernel_type", "op_type"),
    "total": ("total_time",),
    "start": ("run_start",),
    "end": ("run_end",),
}
STEP_RAW_COLS = {
    "step": ("step_num",),
    "start": ("start_point",),
    "end": ("end_point",),
}
LEGACY_OPMEM_COLS = {
    "name": ("Name",),
    "size": ("Size(KB)",),
    "alloc": ("Allocation Time(us)",),
    "duration": ("Duration(us)",),
    "a_alloc": ("Allocation Total Allocated(MB)",),
    "a_res": ("Allocation Total Reserved(MB)",),
    "r_alloc": ("Release Total Allocated(MB)",),
    "r_res": ("Release Total Reserved(MB)",),
    "device": ("Device",),
}


def legacy_groups(filenames: list[str]) -> dict[int, list[str]]:
    """{rank: file names} of the legacy flat files in one folder; only ranks with a core file."""
    by: dict[int, list[str]] = defaultdict(list)
    core: set[int] = set()
    for name in filenames:
        m = LEGACY_FILE_RE.match(name)
        if not m:
            continue
        base = m.group("base")
        if base.startswith("aicore_intermediate"):
            base = "aicore_intermediate"
        r = int(m.group("rank"))
        by[r].append(name)
        if base in CORE_BASES:
            core.add(r)
    return {r: sorted(v) for r, v in sorted(by.items()) if r in core}


def _kind(path: Path) -> str:
    m = LEGACY_FILE_RE.match(path.name)
    if not m:
        return ""
    base = m.group("base")
    if base.startswith("aicore_intermediate"):
        return "aicore_intermediate" + (m.group("tail") or "")
    return base + ("_detail_time" if m.group("tail") == "_detail_time" else "")


# framework_raw's tensor descriptions of an op, the device tasks' columns of the same names
_SHAPE_KEYS = ("input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes", "output_formats")


class LegacyState:
    def __init__(self) -> None:
        self.framework: dict[str, dict[str, Any]] = {}
        self.next_kernel_id = 0
        self.lanes: dict[tuple[str, str], int] = defaultdict(int)
        self.steps: list[tuple[int, int, int]] = []
        self.event_id = 0


@register("mindspore_legacy")
def read_mindspore_legacy(ctx: ReadContext) -> None:
    files = {_kind(p): p for p in sorted(ctx.plan.files) if _kind(p)}
    st = LegacyState()
    m = ctx.meta
    if "profiler_info" in files:
        _read_info(ctx, files["profiler_info"])
    if "framework_raw" in files:
        _read_framework(ctx, st, files["framework_raw"])
    hz = _syscnt_hz(ctx)
    if "step_trace_raw_detail_time" in files:
        _read_step_raw(ctx, st, files["step_trace_raw_detail_time"], hz)
    timeline = files.get("output_timeline_data")
    if timeline is not None:
        _read_timeline_txt(ctx, st, timeline)
        for k in ("ascend_timeline_display", "timeline_display"):
            if k in files:
                ctx.ignore(files[k], problem("ignored.legacy_same_ops"))
    else:
        disp = files.get("ascend_timeline_display") or files.get("timeline_display")
        if disp is not None:
            _read_display(ctx, st, disp)
            m.missing.append(english("missing.legacy.relative_times"))
    if "aicpu_intermediate" in files:
        _read_aicpu(ctx, st, files["aicpu_intermediate"])
    if "aicore_intermediate_type" in files:
        _read_aicore_type(ctx, files["aicore_intermediate_type"])
    if "aicore_intermediate_detail" in files:
        _read_aicore_detail(ctx, files["aicore_intermediate_detail"])
    if "operator_memory" in files:
        _read_operator_memory(ctx, files["operator_memory"])
    cpu = cpu_files(list(files.values()))
    if "cpu_ms_memory_record" in cpu:
        read_memory_record(ctx, cpu["cpu_ms_memory_record"])
    if "cpu_op_type_info" in cpu:
        read_op_type_info(ctx, cpu["cpu_op_type_info"])
    if "cpu_op_detail_info" in cpu:
        read_op_detail_info(ctx, cpu["cpu_op_detail_info"])
    if "cpu_op_execute_timestamp" in cpu:
        write_cpu_ops_from_timestamps(ctx, cpu["cpu_op_execute_timestamp"], cpu.get("cpu_framework"))
    if st.lanes:
        keys = sorted(st.lanes)
        ctx.write(
            "lanes",
            {
                "pid": [k[0] for k in keys],
                "tid": [k[1] for k in keys],
                "process": [k[0] for k in keys],
                "lane": [f"Stream {k[1]}" if k[0] == "Ascend Hardware" else k[0] for k in keys],
                "lane_group": ["device"] * len(keys),
                "n_slices": [st.lanes[k] for k in keys],
            },
        )
    for p in ctx.plan.files:
        k = _kind(p)
        base = k.replace("_detail_time", "")
        ctx.ignore(p, _NOT_INGESTED.get(base) or problem("ignored.not_ingested"))
    _meta(ctx, files, hz)


def _read_info(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "legacy profiler_info.json"):
        info = load_json(path, "profiler_info", obj=True)
        m = ctx.meta
        if isinstance(info.get("rank_size"), int):
            m.world_size = info["rank_size"]
        m.config = {k: info.get(k) for k in ("context_mode", "parallel_mode", "stage_num", "graph_ids") if k in info}
        m.extra["profiler_info"] = info


def _syscnt_hz(ctx: ReadContext) -> int:
    """hwts_frequency (MHz) of a PROF_*/device_*/info.json next to the flat files, else 100 MHz."""
    return prof_hwts_hz(ctx.plan.root) or SYSCNT_HZ_DEFAULT


def _read_framework(ctx: ReadContext, st: LegacyState, path: Path) -> None:
    with ctx.reading(path, "framework_raw") as outcome:
        t = read_csv(path, "framework_raw", FRAMEWORK_COLS, required=("full",))
        outcome.warn_all(t.warnings)
        for full, typ, task, stream, block, info in zip(
            t.text("full"), t.text("type"), t.ints("task"), t.ints("stream"), t.ints("block"), t.get("info")
        ):
            if full is None or full in st.framework:
                continue
            rec: dict[str, Any] = {"type": typ, "task": task, "stream": stream, "block": block}
            try:
                oi = json_value(info) if info else {}
            except ValueError:
                oi = {}
            if isinstance(oi, dict):
                for side in ("input", "output"):
                    ts = [
                        v
                        for k, v in sorted(oi.items(), key=lambda kv: _port(kv[0]))
                        if k.startswith(side + "_") and isinstance(v, dict)
                    ]
                    if ts:
                        rec[f"{side}_shapes"] = ";".join(_shape(v.get("shape")) for v in ts)
                        rec[f"{side}_dtypes"] = ";".join(str(v.get("data_type", "")) for v in ts)
                        rec[f"{side}_formats"] = ";".join(str(v.get("format", "")) for v in ts)
            st.framework[full] = rec
        outcome.rows = len(st.framework)


def _port(key: str) -> int:
    try:
        return int(key.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def _shape(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return "" if v is None else str(v)


def _read_step_raw(ctx: ReadContext, st: LegacyState, path: Path, hz: int) -> None:
    with ctx.reading(path, "step_trace_raw") as outcome:
        t = read_csv(path, "step_trace_raw", STEP_RAW_COLS, required=("step", "start", "end"))
        outcome.warn_all(t.warnings)
        rows: dict[str, list[Any]] = {"step": [], "start_ns": [], "end_ns": [], "dur_ns": [], "source": []}
        for s, a, b in zip(t.ints("step"), t.ints("start"), t.ints("end")):
            if s is None or a is None or b is None or s == 0:  # the last row (step 0) is the average
                continue
            a_ns = a * 1_000_000_000 // hz
            b_ns = b * 1_000_000_000 // hz
            rows["step"].append(s)
            rows["start_ns"].append(a_ns)
            rows["end_ns"].append(b_ns)
            rows["dur_ns"].append(b_ns - a_ns)
            rows["source"].append("step_trace_raw")
            st.steps.append((s, a_ns, b_ns))
        outcome.rows = ctx.write("steps", rows)


def _read_timeline_txt(ctx: ReadContext, st: LegacyState, path: Path) -> None:
    with ctx.reading(path, "output_timeline_data") as outcome:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise InputError(
                str(path), problem("cannot_read_kind", kind="output_timeline_data", detail=exc.strerror or exc)
            ) from exc
        if not lines or not lines[0].strip():
            raise InputError(str(path), problem("empty_op_timeline"))
        header = [h.strip().lower() for h in lines[0].split(",")]
        if len(header) < 4 or not header[0].startswith("op_name"):
            raise InputError(str(path), problem("not_output_timeline", header=repr(lines[0][:80])))
        start_ms = "(ms)" in header[2]
        rows: dict[str, list[Any]] = defaultdict(list)
        bad = 0
        for line in lines[1:]:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4 or not parts[0]:
                if line.strip():
                    bad += 1
                continue
            name, stream, start, dur = parts[0], parts[1], parts[2], parts[3]
            try:
                ts = decimal_text_to_ns(start, unit_ms=start_ms)
                d = decimal_text_to_ns(dur, unit_ms=True)
            except ValueError:
                bad += 1
                continue
            fw = st.framework.get(name, {})
            rows["name"].append(name)
            rows["op_type"].append(fw.get("type"))
            rows["stream_id"].append(int(stream) if stream.isdigit() else fw.get("stream"))
            rows["task_id"].append(fw.get("task"))
            rows["block_dim"].append(fw.get("block"))
            for k in _SHAPE_KEYS:
                rows[k].append(fw.get(k))
            rows["ts_ns"].append(ts)
            rows["dur_ns"].append(d)
        if bad:
            outcome.warn(problem("malformed_lines", n=bad))
        outcome.rows = _write_device_tasks(ctx, st, rows, core_type="AI_CORE", process="Ascend Hardware")
        unknown = sum(1 for t in rows["op_type"] if t is None)
        if unknown and st.framework:
            outcome.warn(problem("not_in_framework_raw", n=unknown))


def _write_device_tasks(
    ctx: ReadContext, st: LegacyState, rows: dict[str, list[Any]], core_type: str, process: str
) -> int:
    """Device tasks (``kernels``) and their slices, from columns of one kind of task. What depends on a
    value alone (communication or not by name, args JSON by op fields, lane by stream) is computed
    once per distinct value; steps by one mask per step."""
    n = len(rows["name"])
    if n == 0:
        return 0
    first = st.next_kernel_id
    st.next_kernel_id += n
    kernels = dict(rows)
    kernels["kernel_id"] = pa.array(np.arange(first, first + n, dtype=np.int64))
    kernels["core_type"] = pa.repeat(pa.scalar(core_type), n)
    kernels["is_communication"] = _per_distinct(rows["name"], _is_comm_name, pa.bool_())
    kernels["step"] = _steps_of(st.steps, rows["ts_ns"])
    written = ctx.write("kernels", kernels)
    if process == "Ascend Hardware":
        tids = _per_distinct(rows.get("stream_id", [None] * n), lambda s: "0" if s is None else str(s), pa.string())
    else:
        tids = pa.repeat(pa.scalar("0"), n)
    fields = [k for k in ("op_type", "task_id", "block_dim", "input_shapes") if k in rows]
    ctx.write(
        "slices",
        {
            "pid": pa.repeat(pa.scalar(process), n),
            "tid": tids,
            "name": rows["name"],
            "category": pa.repeat(pa.scalar(core_type), n),
            "ts_ns": rows["ts_ns"],
            "dur_ns": rows["dur_ns"],
            "event_id": pa.array(np.arange(st.event_id, st.event_id + n, dtype=np.int64)),
            "args": _per_distinct(list(zip(*(rows[k] for k in fields))), lambda v: _args_json(fields, v), pa.string()),
        },
    )
    st.event_id += n
    counts = pc.value_counts(tids)
    for t, c in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()):
        st.lanes[(process, t)] += c
    return written


def _is_comm_name(name: str | None) -> bool:
    return (
        (name or "")
        .rsplit("/", 1)[-1]
        .lower()
        .startswith(("allreduce", "allgather", "reducescatter", "broadcast", "hcom"))
    )


def _args_json(fields: list[str], values: tuple[Any, ...]) -> str | None:
    a = {k: v for k, v in zip(fields, values) if v is not None}
    return json.dumps(a) if a else None


def _per_distinct(values: list[Any], fn: Callable[[Any], Any], typ: pa.DataType) -> pa.Array:
    """``fn`` of every value, called once per distinct value (hashable values)."""
    codes = Codes()
    idx = np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
    return pa.array([fn(v) for v in codes], typ).take(pa.array(idx))


def _steps_of(steps: list[tuple[int, int, int]], ts: list[int | None]) -> pa.Array:
    """``step_containing`` of every time: the first step (in the order of ``steps``) whose [start,
    end) holds it, else null; one mask per step."""
    t = pa.array(ts, pa.int64())
    valid = t.is_valid().to_numpy(zero_copy_only=False)
    tv = t.fill_null(0).to_numpy()
    out = np.zeros(len(t), dtype=np.int64)
    found = np.zeros(len(t), dtype=bool)
    for step, a, b in reversed(steps):  # the first step in order wins: written last
        m = valid & (tv >= a) & (tv < b)
        out[m] = step
        found |= m
    return pa.array(out, pa.int64(), mask=~found)


def _read_aicpu(ctx: ReadContext, st: LegacyState, path: Path) -> None:
    with ctx.reading(path, "aicpu_intermediate") as outcome:
        t = read_csv(path, "aicpu_intermediate", AICPU_COLS, required=("type", "start", "end"))
        outcome.warn_all(t.warnings)
        rows: dict[str, list[Any]] = defaultdict(list)
        starts, bad_a = decimal_cells_to_ns(t.get("start"), unit_ms=False)
        ends, bad_b = decimal_cells_to_ns(t.get("end"), unit_ms=False)
        skipped: list[int] = []  # rows without a start or an end that is a number (counted from 1)
        for i, (name, ts, te) in enumerate(zip(t.text("type"), starts, ends)):
            if ts is None or te is None:
                skipped.append(i + 1)
                continue
            rows["name"].append(name)
            rows["op_type"].append(name)
            rows["stream_id"].append(None)
            rows["ts_ns"].append(ts)
            rows["dur_ns"].append(te - ts)
        if skipped:
            bad = bad_a or bad_b
            named = ", ".join(english("where.row", n=n) for n in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
            key = "rows_without_time_eg" if bad else "rows_without_time"
            outcome.warn(problem(key, n=len(skipped), rows=named, **({"example": repr(bad[0])} if bad else {})))
        outcome.rows = _write_device_tasks(ctx, st, rows, core_type="AI_CPU", process="AI CPU")


class _DisplayArgs(msgspec.Struct, gc=False):
    """What the display's reader takes from an event's ``args`` (other keys are skipped)."""

    fullname: Any = None
    type: Any = None


_DISPLAY_ARGS = msgspec.json.Decoder(_DisplayArgs)
# framework_raw's fields of an op (``LegacyState.framework``) -> the device task's column, and its type
_FW_COLUMNS = {
    "type": ("op_type", pa.string()),
    "task": ("task_id", pa.int64()),
    "block": ("block_dim", pa.int64()),
    **{k: (k, pa.string()) for k in _SHAPE_KEYS},
}


def _read_display(ctx: ReadContext, st: LegacyState, path: Path) -> None:
    """ascend_timeline_display: device ops (pid 1, tid = stream) and AI CPU ops (pid 9000), relative µs.
    Column by column per block, as every Chrome trace (``chrome.columns``): the X events' fields in
    one C-level pass each, their ``args`` in one msgspec call, framework_raw looked up once per op name."""
    with ctx.reading(path, "ascend_timeline_display") as outcome:
        ts_stream = TraceStream(path)
        rows: dict[str, list[Any]] = defaultdict(list)
        cpu_rows: dict[str, list[Any]] = defaultdict(list)
        for events in ts_stream.blocks():
            is_x = pc.equal(pa.array(field_values(events, "ph"), pa.string()), "X").to_numpy(zero_copy_only=False)
            xs = list(compress(events, is_x))
            if not xs:
                continue
            cols = _display_columns(st, xs)
            device = pc.equal(pc.fill_null(id_column(field_values(xs, "pid")), ""), "1")
            for target, mask in ((rows, device), (cpu_rows, pc.invert(device))):
                for k, col in cols.items():
                    target[k].extend(col.filter(mask).to_pylist())
        outcome.warn_all(ts_stream.warnings)
        outcome.rows = _write_device_tasks(ctx, st, rows, core_type="AI_CORE", process="Ascend Hardware")
        outcome.rows += _write_device_tasks(ctx, st, cpu_rows, core_type="AI_CPU", process="AI CPU")


def _display_columns(st: LegacyState, xs: list[Event]) -> dict[str, pa.Array]:
    """The device-task columns of a block's X events: the name is ``args.fullname`` (else the event's
    name), the op type ``args.type`` (else framework_raw's), the rest from framework_raw by fullname."""
    decoded = decode_args(raw_json_column(xs), _DISPLAY_ARGS)  # None: no args, or not an object
    full = _text_or_null(list(map(getattr, decoded, repeat("fullname"), repeat(None))))
    has_full = pc.fill_null(pc.not_equal(full, ""), False)
    key = pc.if_else(has_full, full, "")  # framework_raw's key: the fullname, "" without one
    enc = pc.dictionary_encode(key)
    ops = [st.framework.get(k, {}) for k in enc.dictionary.to_pylist()]  # once per distinct op
    cols = {"name": pc.if_else(has_full, full, pa.array(field_values(xs, "name"), pa.string()))}
    fw = {col: pa.array([op.get(k) for op in ops], typ).take(enc.indices) for k, (col, typ) in _FW_COLUMNS.items()}
    their_type = _text_or_null(list(map(getattr, decoded, repeat("type"), repeat(None))))
    cols["op_type"] = pc.if_else(pc.fill_null(pc.not_equal(their_type, ""), False), their_type, fw["op_type"])
    cols["stream_id"] = _stream_ids(id_column(field_values(xs, "tid")))
    cols["task_id"], cols["block_dim"] = fw["task_id"], fw["block_dim"]
    for k in _SHAPE_KEYS:
        cols[k] = fw[k]
    cols["ts_ns"] = times_ns(field_values(xs, "ts"))
    cols["dur_ns"] = durations_ns(field_values(xs, "dur"))
    return cols


def _text_or_null(values: list[Any]) -> pa.Array:
    """Text values as a string array; a value that is no text (a number where a name belongs) is null."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([v if isinstance(v, str) else None for v in values], pa.string())


def _stream_ids(tids: pa.Array) -> pa.Array:
    """A tid that is a decimal number is the task's stream id; any other (or none) is null."""
    digits = pc.fill_null(pc.match_substring_regex(tids, r"^[0-9]+$"), False)
    text = pc.if_else(digits, tids, pa.scalar(None, pa.string()))
    try:
        return pc.cast(text, pa.int64())
    except (pa.ArrowInvalid, OverflowError):  # beyond int64: none
        return pa.array([int(t) if t is not None and len(t) < 19 else None for t in text.to_pylist()], pa.int64())


def _read_aicore_type(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "aicore_intermediate_type") as outcome:
        t = read_csv(path, "aicore_intermediate_type", AICORE_TYPE_COLS, required=("type", "total"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["op_statistic"] * t.n_rows,
                "name": t.text("type"),
                "core_type": ["AI_CORE"] * t.n_rows,
                "count": t.ints("count"),
                "total_ns": _ms_cells(outcome, t.get("total"), "total"),
                "ratio_pct": t.floats("percent"),
            },
        )


def _ms_cells(outcome: FileOutcome, values: list[str | None], column: str) -> list[int | None]:
    """ms cells to ns; a cell that is no number is empty, and said so."""
    out, bad = decimal_cells_to_ns(values)
    if bad:
        outcome.warn(problem("cells_no_numbers", n=len(bad), column=repr(column), example=repr(bad[0])))
    return out


def _read_aicore_detail(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "aicore_intermediate_detail") as outcome:
        t = read_csv(path, "aicore_intermediate_detail", AICORE_DETAIL_COLS, required=("name", "time"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["op_detail"] * t.n_rows,
                "name": t.text("name"),
                "core_type": t.text("type"),
                "count": t.ints("count"),
                "avg_ns": _ms_cells(outcome, t.get("time"), "time"),
            },
        )


def _read_operator_memory(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "operator_memory") as outcome:
        t = read_csv(path, "operator_memory", LEGACY_OPMEM_COLS, required=("name", "size", "alloc"))
        outcome.warn_all(t.warnings)
        alloc = t.ns_from_us("alloc")
        dur = t.ns_from_us("duration")

        def mb(key: str) -> list[int | None]:
            return [scaled_int(v, 1024 * 1024) for v in t.floats(key)]

        outcome.rows = ctx.write(
            "operator_memory",
            {
                "name": t.text("name"),
                "size_bytes": [scaled_int(v, 1024) for v in t.floats("size")],
                "alloc_ns": alloc,
                "release_ns": [fit_ns(a + d) if a is not None and d is not None else None for a, d in zip(alloc, dur)],
                "duration_ns": dur,
                "alloc_allocated_bytes": mb("a_alloc"),
                "alloc_reserved_bytes": mb("a_res"),
                "release_allocated_bytes": mb("r_alloc"),
                "release_reserved_bytes": mb("r_res"),
                "device": t.text("device"),
            },
        )


def _meta(ctx: ReadContext, files: dict[str, Path], hz: int) -> None:
    m = ctx.meta
    w = ctx.writer
    m.producer_version = m.producer_version or "MindSpore <= 2.2 (legacy profiler files)"
    ctx.add_table_capabilities()
    if any(k in files for k in ("input_shapes",)) or "framework_raw" in files:
        m.capabilities.add("shapes")
    m.missing.append(english("missing.legacy.device_clock"))
    if w.has("steps"):
        m.extra["syscnt_hz"] = hz
        if hz == SYSCNT_HZ_DEFAULT:
            m.missing.append(english("missing.legacy.assumed_hz"))
    else:
        m.missing.append(english("missing.legacy.no_steps"))
    m.missing.append(english("missing.legacy.no_comm"))
    if not w.has("operators"):
        m.missing.append(english("missing.legacy.no_host_ops"))
    if not w.has("memory_samples"):
        m.missing.append(english("missing.legacy.no_memory"))


_EXTRAS = {
    re.compile(r"^step_trace_point_info\.json$"): problem("ignored.step_trace_point"),
    re.compile(r"^ascend_cluster_analyse_.*\.csv$"): problem("ignored.cluster_summary"),
}


def legacy_extras(filenames: list[str]) -> dict[str, str]:
    """Files without a rank suffix that sit next to legacy flat files: {name: why not ingested}."""
    out = {}
    for name in filenames:
        for rx, why in _EXTRAS.items():
            if rx.match(name):
                out[name] = why
    return out
