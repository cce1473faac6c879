"""torch_npu text export: a ``*_ascend_pt`` folder with ``ASCEND_PROFILER_OUTPUT/`` CSV and JSON files
(formats.md §1). Every file is optional and read on its own; a bad file is recorded and the others
are still ingested.

| file | table(s) |
|---|---|
| ``trace_view.json`` (streamed) | ``slices``, ``lanes``, ``operators`` (Python ``cpu_op``, self time from nesting), ``steps`` (``ProfilerStep#N``), ``counters`` (C events) |
| ``kernel_details.csv`` | ``kernels`` (+ PMU columns -> ``kernel_metrics``, times renamed ``*_ns``) |
| ``l2_cache.csv`` | ``kernel_metrics`` ``l2_hit_rate`` / ``l2_victim_rate``, joined to kernels by stream and task id (by name order at Level0) |
| ``operator_details.csv`` | attached to ``operators``: ``device_self_ns`` / ``device_total_ns``, matched by name and order, checked against the trace's host durations (see below) |
| ``step_trace_time.csv`` | ``step_trace`` |
| ``op_statistic.csv``, ``api_statistic.csv`` | ``statistics`` |
| ``communication.json`` | wait / transit / sync / idle of ``comm_ops``; ``comm_bandwidth`` (with size distribution) |
| ``communication_matrix.json`` | ``comm_links`` (group-local and global ranks), ``comm_groups`` |
| ``memory_record.csv``, ``npu_module_mem.csv`` | ``memory_samples`` |
| ``operator_memory.csv`` | ``operator_memory`` |
| ``profiler_info_{rank}.json``, ``profiler_metadata.json`` | collection metadata, capabilities, missing sentences |

``operator_details.csv`` holds one row per framework op instance in start-time order, ``ProfilerStep``
excluded. Its rows are matched to the trace's ``cpu_op`` events by (name, n-th occurrence in start
order); a match is kept only when the CSV's host total duration equals the event's duration (±1 µs),
so a mismatch never attaches wrong numbers. When ``trace_view.json`` is missing, the operators are
written from ``operator_details.csv`` alone (durations and stacks, no timestamps).

``comm_ops`` rows start from the communication rows of ``kernel_details.csv`` (exact start and
duration), else the big ops of the trace's HCCL ``Group N Communication`` lanes, else
``communication.json``; dtype / count / algorithm come from the trace, the wait / transit split and
the group hash from ``communication.json`` (Level1+). ``Total Op Info`` aggregates are not stored
(sum the rows instead). Timestamps are parsed from their µs strings to exact integer ns.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from ..errors import InputError
from ..format import a_or_an
from ..units import us_text_to_ns
from .base import ReadContext, register
from .chrome_trace import Event, LaneInfo, TraceStream, counter_columns, id_text, slice_columns, times_ns
from .comm_names import P2P_TYPES, normalize_op_type
from .csvfile import CsvTable, _ns_from_us_array, iter_csv, read_csv, text_cell
from .nesting import self_time
from .scratch import ScratchStage
from .torch_npu_common import (
    OUTPUT_DIR,
    PROFILER_INFO_RE,
    RAW_HINT,
    CommTime,
    Groups,
    ProducerFiles,
    fill_meta,
    gbps,
    hccl_bytes,
    last_step_started,
    link_rows,
    load_json,
    mb_bytes,
    ms_ns,
    parse_link_key,
    read_producer_files,
    split_op_key,
    step_from_key,
    switch_sentences,
)

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

# ---------------------------------------------------------------------------------------------
# column aliases (formats.md §7.2): canonical key -> header names as written by some version
# ---------------------------------------------------------------------------------------------

KERNEL_COLS = {
    "step": ("Step Id", "Step ID"),
    "device": ("Device_id", "Device Id", "Device ID"),
    "model": ("Model ID", "Model Id"),
    "task": ("Task ID", "Task Id"),
    "stream": ("Stream ID", "Stream Id"),
    "name": ("Name", "Op Name"),
    "type": ("Type", "OP Type"),
    "state": ("OP State",),
    "core": ("Accelerator Core", "Task Type"),
    "start": ("Start Time(us)", "Task Start Time(us)"),
    "dur": ("Duration(us)", "Task Duration(us)"),
    "wait": ("Wait Time(us)", "Task Wait Time(us)"),
    "block": ("Block Dim", "Block Num"),
    "mix_block": ("Mix Block Dim", "Mix Block Num"),
    "hf32": ("HF32 Eligible",),
    "in_shapes": ("Input Shapes",),
    "in_dtypes": ("Input Data Types",),
    "in_formats": ("Input Formats",),
    "out_shapes": ("Output Shapes",),
    "out_dtypes": ("Output Data Types",),
    "out_formats": ("Output Formats",),
    "context": ("Context ID", "Context Id"),
}
L2_COLS = {
    "stream": ("Stream Id", "Stream ID"),
    "task": ("Task Id", "Task ID"),
    "hit": ("Hit Rate",),
    "victim": ("Victim Rate",),
    "name": ("Op Name", "Name"),
    "device": ("Device_id",),
}
OPDETAIL_COLS = {
    "name": ("Name",),
    "shapes": ("Input Shapes",),
    "stack": ("Call Stack",),
    "host_self": ("Host Self Duration(us)",),
    "host_total": ("Host Total Duration(us)",),
    "dev_self": ("Device Self Duration(us)",),
    "dev_total": ("Device Total Duration(us)",),
}
STEP_TRACE_COLS = {
    "device": ("Device_id",),
    "step": ("Step", "Step Id", "Step ID"),
    "computing": ("Computing",),
    "comm_not_overlapped": ("Communication(Not Overlapped)",),
    "overlapped": ("Overlapped",),
    "communication": ("Communication",),
    "free": ("Free",),
    "stage": ("Stage",),
    "bubble": ("Bubble",),
    "comm_not_overlapped_excl_receive": ("Communication(Not Overlapped and Exclude Receive)",),
    "preparing": ("Preparing",),
}
OP_STAT_COLS = {
    "type": ("OP Type",),
    "core": ("Core Type",),
    "count": ("Count",),
    "total": ("Total Time(us)",),
    "min": ("Min Time(us)",),
    "avg": ("Avg Time(us)",),
    "max": ("Max Time(us)",),
    "ratio": ("Ratio(%)",),
}
API_STAT_COLS = {
    "level": ("Level",),
    "name": ("API Name",),
    "total": ("Time(us)",),
    "count": ("Count",),
    "avg": ("Avg(us)",),
    "min": ("Min(us)",),
    "max": ("Max(us)",),
    "variance": ("Variance",),
}
MEM_RECORD_COLS = {
    "component": ("Component",),
    "ts": ("Timestamp(us)",),
    "allocated": ("Total Allocated(MB)",),
    "reserved": ("Total Reserved(MB)",),
    "active": ("Total Active(MB)",),
    "stream_ptr": ("Stream Ptr",),
    "device": ("Device Type", "Device"),
}
MODULE_MEM_COLS = {
    "device_id": ("Device_id",),
    "component": ("Component",),
    "ts": ("Timestamp(us)",),
    "reserved": ("Total Reserved(MB)",),
    "device": ("Device", "Device Type"),
}
OP_MEM_COLS = {
    "name": ("Name",),
    "size": ("Size(KB)",),
    "alloc": ("Allocation Time(us)",),
    "release": ("Release Time(us)",),
    "active_release": ("Active Release Time(us)",),
    "duration": ("Duration(us)",),
    "active_duration": ("Active Duration(us)",),
    "a_alloc": ("Allocation Total Allocated(MB)",),
    "a_res": ("Allocation Total Reserved(MB)",),
    "a_act": ("Allocation Total Active(MB)",),
    "r_alloc": ("Release Total Allocated(MB)",),
    "r_res": ("Release Total Reserved(MB)",),
    "r_act": ("Release Total Active(MB)",),
    "stream_ptr": ("Stream Ptr",),
    "device": ("Device Type", "Device"),
}

# files of ASCEND_PROFILER_OUTPUT this version does not ingest, with the reason shown to the user
_NOT_INGESTED = {
    "data_preprocess.csv": "AI CPU pre-processing statistics are not ingested by this version",
    "task_time.csv": "task times duplicate kernel_details.csv; not ingested",
    "static_op_mem.csv": "static graph memory is not ingested by this version",
    "hccs.csv": "interconnect counters are not ingested by this version",
    "pcie.csv": "interconnect counters are not ingested by this version",
    "nic.csv": "network counters are not ingested by this version",
    "roce.csv": "network counters are not ingested by this version",
    "soc_pmu.csv": "SoC PMU counters are not ingested by this version",
}


# ---------------------------------------------------------------------------------------------
# small converters
# ---------------------------------------------------------------------------------------------

_UNIT = re.compile(r"^(?P<base>.*?)\s*\((?P<unit>[^()]*)\)\s*$")
_METRIC_ALIASES = {"aicore_time": "aic_total_time", "aiv_time": "aiv_total_time"}


def metric_name(header: str) -> tuple[str, float]:
    """PMU column header -> (metric name with its unit, factor to that unit):
    'aic_mac_time(us)' -> ('aic_mac_time_ns', 1000); 'cube_utilization(%)' -> ('cube_utilization_pct', 1);
    'aic_l0a_read_bw(GB/s)' -> ('aic_l0a_read_bw_bytes_per_s', 1e9); 'aic_mac_ratio' -> as is."""
    h = header.strip()
    m = _UNIT.match(h)
    base, unit = (m.group("base"), m.group("unit").strip().lower()) if m else (h, "")
    base = "_".join(base.strip().split())
    base = _METRIC_ALIASES.get(base, base)
    if unit == "us":
        return f"{base}_ns", 1000.0
    if unit == "ms":
        return f"{base}_ns", 1e6
    if unit == "%":
        return f"{base}_pct", 1.0
    if unit == "gb/s":
        return f"{base}_bytes_per_s", 1e9
    if unit:
        return f"{base}_{re.sub(r'[^a-z0-9]+', '_', unit).strip('_')}", 1.0
    return base, 1.0


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        s = str(v).strip()
        return None if text_cell(s) is None else float(s)
    except ValueError:
        return None


def _ns_us_float(v: Any) -> int | None:
    """A µs number from JSON to ns through its shortest decimal form (repr), not through f * 1000:
    1736408883732241.5 µs -> 1736408883732241500 ns."""
    f = _num(v)
    if f is None:
        return None
    return us_text_to_ns(repr(f) if isinstance(v, float) else str(v))


def _mb_list(t: CsvTable, key: str) -> pa.Array:
    """MB cells (MB = 1024^2 bytes) as int64 bytes."""
    v = pa.array(t.floats(key), pa.float64())
    return pc.cast(pc.round(pc.multiply(v, float(1 << 20))), pa.int64())


def _device_id(device: str | None) -> int | None:
    if not device:
        return None
    m = re.search(r"(\d+)\s*$", device)
    return int(m.group(1)) if m else None


def _outcome_warnings(outcome: Any, warnings: list[str]) -> None:
    for w in warnings:
        outcome.warn(w)


# ---------------------------------------------------------------------------------------------
# trace_view.json
# ---------------------------------------------------------------------------------------------


class NpuOpArgs(msgspec.Struct, gc=False):
    input_dims: str | list[Any] | None = msgspec.field(default=None, name="Input Dims")
    input_type: str | list[Any] | None = msgspec.field(default=None, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    seq: int | None = msgspec.field(default=None, name="Sequence number")


class HcclArgs(msgspec.Struct, gc=False):
    data_type: str | None = None
    count: int | float | None = None
    alg_type: str | None = None


_OP_DEC = msgspec.json.Decoder(NpuOpArgs)
_HCCL_DEC = msgspec.json.Decoder(HcclArgs)
_ANY = msgspec.json.Decoder()


def _dec(dec: msgspec.json.Decoder, raw: msgspec.Raw) -> Any:
    if not len(raw):
        return None
    try:
        return dec.decode(raw)
    except msgspec.DecodeError:
        return None


def _as_text(v: str | list[Any] | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v if v.strip() else None
    return msgspec.json.encode(v).decode()


def _ts_ns(values: list[Any]) -> pa.Array:
    """Event timestamps to int64 ns: torch_npu writes exact µs strings (vectorised, exact), else numbers."""
    if values and all(type(v) is str for v in values):
        arr, todo = _ns_from_us_array(values)
        if not todo:
            return arr
    return times_ns(values)


@functools.lru_cache(maxsize=1 << 16)
def stack_text(s: str | None) -> str | None:
    """'a.py(1): f;\\r\\nb.py(2): g' -> 'a.py(1): f\\nb.py(2): g' (stacks repeat: cached)."""
    if not s:
        return None
    frames = [f.strip().rstrip(";").strip() for f in s.replace("\r", "\n").split("\n")]
    return "\n".join(f for f in frames if f) or None


def has_shape(s: str | None) -> bool:
    return bool(s) and bool(re.search(r"\d", s or ""))


class TaskArgs(msgspec.Struct, gc=False):
    task_type: str | None = msgspec.field(default=None, name="Task Type")
    stream: int | str | None = msgspec.field(default=None, name="Stream Id")
    physic_stream: int | str | None = msgspec.field(default=None, name="Physic Stream Id")
    task: int | str | None = msgspec.field(default=None, name="Task Id")
    model: int | str | None = msgspec.field(default=None, name="Model Id")


_TASK_DEC = msgspec.json.Decoder(TaskArgs)


def _task_int(v: Any) -> int | None:
    """A task's stream / task id; CANN's "none" values (4294967295, 65535) become None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        x = int(v)
    except (TypeError, ValueError):
        return None
    return None if x in (4294967295, 65535) else x


class DeviceTasks:
    """Device tasks picked from the Ascend Hardware lanes of a chrome-trace array (the ``kernels``
    table when no CSV gives them: msprof's json timeline, a trace_view.json without kernel_details.csv)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self.cols["name"])

    def pick(self, e: Event) -> None:
        a = _dec(_TASK_DEC, e.args)
        k = self.cols
        k["name"].append(e.name)
        k["core_type"].append(a.task_type if a else None)
        k["is_communication"].append(
            (a is not None and (a.task_type or "").upper() in ("HCCL", "COMMUNICATION")) or e.name.startswith("hcom_")
        )
        stream = _task_int(a.stream if a and a.stream is not None else (a.physic_stream if a else None))
        k["stream_id"].append(stream if stream is not None else _task_int(e.tid))
        k["task_id"].append(_task_int(a.task) if a else None)
        k["ts"].append(e.ts)
        k["dur"].append(e.dur if e.dur is not None else 0.0)

    def columns(self, first_kernel_id: int, step_of: Callable[[list[int | None]], list[int | None]]) -> dict[str, Any]:
        k = {name: list(v) for name, v in self.cols.items()}
        ts = times_ns(k.pop("ts"))
        dur = times_ns(k.pop("dur"))
        n = len(k["name"])
        return {
            **k,
            "kernel_id": list(range(first_kernel_id, first_kernel_id + n)),
            "ts_ns": ts,
            "dur_ns": dur,
            "step": step_of(ts.to_pylist()),
        }


class TraceRouter:
    """One pass over trace_view.json: slices written directly, the rest staged."""

    def __init__(self, ctx: ReadContext, stage: ScratchStage, op_processes: frozenset[str] = frozenset()):
        self.ctx = ctx
        self.stage = stage
        # processes whose X events are framework ops even without the cpu_op category (MindSpore:
        # "MindSpore", "CPU OP"); an event's process is known because M events precede its X events
        self.op_processes = op_processes
        self.lanes = LaneInfo()
        self.lane_counts: Counter[tuple[str, str]] = Counter()
        self.event_base = 0
        self.has_stacks = False
        self.has_shapes = False
        self.steps: list[tuple[int, int, int]] = []  # (step, start, end)
        self.hccl: list[dict[str, Any]] = []  # candidate big communication ops
        self.cann_levels: Counter[str] = Counter()
        self.device_tasks: DeviceTasks | None = None  # set when kernel_details.csv is missing

    def route(self, events: list[Event]) -> None:
        first = self.event_base
        self.event_base += len(events)
        sl_idx: list[int] = []
        sl_ev: list[Event] = []
        op_idx: list[int] = []
        ctr_idx: list[int] = []
        for i, e in enumerate(events):
            ph = e.ph
            if ph == "X" or ph == "i" or ph == "I":
                sl_idx.append(i)
                sl_ev.append(e)
                if e.cat == "cpu_op" or (
                    self.op_processes and ph == "X" and self.process(id_text(e.pid)) in self.op_processes
                ):
                    op_idx.append(i)
                elif e.cat is None and ph == "X" and e.name.startswith("hcom_"):
                    a = _dec(_HCCL_DEC, e.args)
                    self.hccl.append(
                        {
                            "pid": id_text(e.pid),
                            "tid": id_text(e.tid),
                            "name": e.name,
                            "ts": e.ts,
                            "dur": e.dur,
                            "dtype": a.data_type if a else None,
                            "count": a.count if a else None,
                            "alg": a.alg_type if a else None,
                        }
                    )
                elif e.cat is None and e.name.startswith(("AscendCL@", "Runtime@", "Node@", "Hccl@", "Model@")):
                    self.cann_levels[e.name.split("@", 1)[0]] += 1
                if self.device_tasks is not None and ph == "X" and e.cat is None and self.is_device_task(e):
                    self.device_tasks.pick(e)
            elif ph == "M":
                self.lanes.add(e)
            elif ph == "C":
                ctr_idx.append(i)
        if sl_ev:
            cols = slice_columns(sl_ev, first, sl_idx, 0)
            self.lane_counts.update((id_text(e.pid) or "", id_text(e.tid) or "") for e in sl_ev)
            self.ctx.write("slices", cols)
        if op_idx:
            self._ops(events, op_idx, first)
        if ctr_idx:
            self._counters(events, ctr_idx)

    def _ops(self, events: list[Event], idx: list[int], first: int) -> None:
        evs = [events[i] for i in idx]
        args = [_dec(_OP_DEC, e.args) for e in evs]
        shapes = [_as_text(a.input_dims) if a is not None else None for a in args]
        types = [_as_text(a.input_type) if a is not None else None for a in args]
        stacks = [stack_text(a.call_stack) if a is not None else None for a in args]
        if not self.has_shapes and any(has_shape(s) for s in shapes):
            self.has_shapes = True
        if not self.has_stacks and any(stacks):
            self.has_stacks = True
        ts = _ts_ns([e.ts for e in evs])
        dur = times_ns([e.dur if e.dur is not None else 0.0 for e in evs])
        for j, e in enumerate(evs):
            if e.name.startswith("ProfilerStep#"):
                m = _STEP_RE.match(e.name)
                t0 = ts[j].as_py()
                d = dur[j].as_py()
                if m and t0 is not None:
                    self.steps.append((int(m.group(1)), t0, t0 + (d or 0)))
        t = pa.table(
            {
                "name": pa.array([e.name for e in evs], pa.string()),
                "category": pa.array([e.cat or self.process(id_text(e.pid)) or None for e in evs], pa.string()),
                "tid": pa.array([id_text(e.tid) for e in evs], pa.string()),
                "_pid": pa.array([id_text(e.pid) for e in evs], pa.string()),
                "ts_ns": ts,
                "dur_ns": dur,
                "input_shapes": pa.array(shapes, pa.string()),
                "input_types": pa.array(types, pa.string()),
                "call_stack": pa.array(stacks, pa.string()),
                "sequence_number": pa.array([a.seq if a is not None else None for a in args], pa.int64()),
                "event_id": pa.array([first + i for i in idx], pa.int64()),
            }
        )
        self.stage.write("operators", t)

    def _counters(self, events: list[Event], idx: list[int]) -> None:
        cols = counter_columns([events[i] for i in idx])
        if cols is not None:
            cols["_pid"] = cols.pop("pid")
            self.stage.write("counters", pa.table(cols))

    # -- lanes -----------------------------------------------------------------------------------

    def process(self, pid: str | None) -> str:
        return self.lanes.process_names.get(pid or "", "")

    def is_device_task(self, e: Event) -> bool:
        pid = id_text(e.pid)
        return is_device_lane(self.process(pid), self.lane(pid, id_text(e.tid)))

    def lane(self, pid: str | None, tid: str | None) -> str:
        return self.lanes.thread_names.get((pid or "", tid or ""), "")

    def lane_rows(self) -> dict[str, list[Any]]:
        rows: dict[str, list[Any]] = {
            k: [] for k in ("pid", "tid", "process", "lane", "lane_group", "sort_index", "n_slices")
        }
        for pid, tid in sorted(self.lane_counts):
            process = self.process(pid)
            group = lane_group(process)
            rows["pid"].append(pid)
            rows["tid"].append(tid)
            rows["process"].append(process or pid)
            rows["lane"].append(self.lane(pid, tid) or (f"Stream {tid}" if group == "device" else f"Thread {tid}"))
            rows["lane_group"].append(group)
            rows["sort_index"].append(self.lanes.thread_sort.get((pid, tid)))
            rows["n_slices"].append(self.lane_counts[(pid, tid)])
        return rows

    def big_comm_ops(self) -> list[dict[str, Any]]:
        """hcom_* events on the communication lanes (HCCL 'Group N Communication'), not on Plane lanes."""
        out = []
        for h in self.hccl:
            proc = self.process(h["pid"])
            lane = self.lane(h["pid"], h["tid"])
            if lane_group(proc) == "communication" and not lane.startswith("Plane") or not proc and not lane:
                out.append(h)
        return out


def is_device_lane(process: str, lane: str) -> bool:
    """A device stream lane, where the tasks are (not msprof's Step Trace lane)."""
    return lane_group(process) == "device" and not lane.startswith("Step Trace")


def lane_group(process: str) -> str:
    p = process.strip()
    if p in ("Python", "CANN", "MindSpore", "CPU OP", "Scope Layer") or p.startswith(("Python", "CANN", "GC")):
        return "host"
    if p == "Ascend Hardware" or p.startswith("NPU"):
        return "device"
    if p in ("HCCL", "Communication") or p.startswith("HCCL"):
        return "communication"
    if p == "Overlap Analysis":
        return "overlap"
    return "other"


# ---------------------------------------------------------------------------------------------
# the reader
# ---------------------------------------------------------------------------------------------


class TextExport:
    """State shared between the files of one collection."""

    def __init__(self, ctx: ReadContext, op_processes: frozenset[str] = frozenset()):
        self.ctx = ctx
        self.op_processes = op_processes  # see TraceRouter (MindSpore's framework-op processes)
        self.root = ctx.plan.root
        # a trace_view.json found on its own (discovery's loose_trace_view): its folder stands for the output folder
        self.out = self.root if ctx.plan.hints.get("loose_trace_view") else self.root / OUTPUT_DIR
        self.files: dict[str, Path] = {}
        self.stage = ScratchStage(ctx.scratch_dir())
        self.router: TraceRouter | None = None
        self.kernel_comm: list[dict[str, Any]] = []
        self.comm_times: list[CommTime] = []
        self.op_details: pa.Table | None = None
        self.op_details_path: Path | None = None
        self.device_ids: set[int] = set()
        self.pf = ProducerFiles()
        self.groups: Groups | None = None
        self.kernel_metrics = False
        self.l2 = False


@register("torch_npu_text")
def read_torch_npu_text(ctx: ReadContext, op_processes: frozenset[str] = frozenset()) -> None:
    """Also reads MindSpore's ASCEND_PROFILER_OUTPUT (same layout): ``op_processes`` names the trace
    processes whose events are framework ops (see TraceRouter)."""
    st = TextExport(ctx, op_processes)
    plan = ctx.plan
    for f in plan.files:
        if f.parent == st.out:
            st.files[f.name] = f
    st.pf = read_producer_files(ctx, st.root)
    st.groups = Groups(ctx.rank, plan.hints, st.pf.metadata)
    _ignore_others(ctx, st)
    if not st.out.is_dir() or not any(
        n in st.files for n in ("trace_view.json", "kernel_details.csv", "operator_details.csv", "step_trace_time.csv")
    ):
        ctx.meta.missing.append(f"no parsed torch_npu output in {OUTPUT_DIR}/: {RAW_HINT}")
        if not any(n.endswith((".csv", ".json")) for n in st.files):
            ctx.meta.status = "unparsed"
    f = st.files
    if plan.hints.get("loose_trace_view"):
        ctx.meta.missing.append(
            f"trace_view.json found on its own (no *_ascend_pt/{OUTPUT_DIR}/ around it): "
            "the timeline and operators only"
        )
    if "trace_view.json" in f:
        _read_trace(ctx, st, f["trace_view.json"])
    if "kernel_details.csv" in f:
        _read_kernels(ctx, st, f["kernel_details.csv"], f.get("l2_cache.csv"))
    elif "l2_cache.csv" in f:
        with ctx.reading(f["l2_cache.csv"], "l2_cache.csv"):
            raise InputError(
                str(f["l2_cache.csv"]),
                "not read: kernel_details.csv is missing, so L2 rates cannot be joined to kernels",
            )
    if "operator_details.csv" in f:
        _read_op_details(ctx, st, f["operator_details.csv"])
    if "step_trace_time.csv" in f:
        _read_step_trace(ctx, f["step_trace_time.csv"])
    if "op_statistic.csv" in f:
        _read_op_statistic(ctx, f["op_statistic.csv"])
    if "api_statistic.csv" in f:
        _read_api_statistic(ctx, f["api_statistic.csv"])
    if "communication.json" in f:
        _read_communication(ctx, st, f["communication.json"])
    if "communication_matrix.json" in f:
        _read_matrix(ctx, st, f["communication_matrix.json"])
    if "memory_record.csv" in f:
        _read_memory_record(ctx, st, f["memory_record.csv"])
    if "npu_module_mem.csv" in f:
        _read_module_mem(ctx, st, f["npu_module_mem.csv"])
    if "operator_memory.csv" in f:
        _read_operator_memory(ctx, f["operator_memory.csv"])
    _finish(ctx, st)


def _ignore_others(ctx: ReadContext, st: TextExport) -> None:
    known = {
        "trace_view.json",
        "kernel_details.csv",
        "l2_cache.csv",
        "operator_details.csv",
        "step_trace_time.csv",
        "op_statistic.csv",
        "api_statistic.csv",
        "communication.json",
        "communication_matrix.json",
        "memory_record.csv",
        "npu_module_mem.csv",
        "operator_memory.csv",
    }
    for p in ctx.plan.files:
        try:
            rel = p.relative_to(st.root)
        except ValueError:
            continue
        top = rel.parts[0]
        if p.parent == st.out:
            if p.name in known:
                continue
            if p.name.endswith(".db"):
                ctx.ignore(p, "db export of the same data; the text export was read")
            else:
                ctx.ignore(p, _NOT_INGESTED.get(p.name, "not a file this version ingests"))
        elif len(rel.parts) == 1 and (PROFILER_INFO_RE.match(p.name) or p.name == "profiler_metadata.json"):
            continue
        elif top == "FRAMEWORK" or top.startswith("PROF_"):
            ctx.ignore(p, f"raw profiler data; its parsed form is in {OUTPUT_DIR}/")
        elif top == "logs":
            ctx.ignore(p, "torch_npu parser log")
        else:
            ctx.ignore(p, "not a torch_npu output file")


def _read_trace(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "trace_view.json") as outcome:
        ts = TraceStream(path)
        router = TraceRouter(ctx, st.stage, st.op_processes)
        if "kernel_details.csv" not in st.files:
            router.device_tasks = DeviceTasks()
        st.router = router
        for events in ts.blocks():
            router.route(events)
        outcome.rows = ts.n_events
        _outcome_warnings(outcome, ts.warnings)
        if not ts.bare_array:
            outcome.warn("trace_view.json is a trace object, not the bare event array torch_npu writes; read anyway")
        if ts.n_events == 0:
            raise InputError(str(path), "trace has no events")


def _read_kernels(
    ctx: ReadContext,
    st: TextExport,
    path: Path,
    l2_path: Path | None,
    kind: str = "kernel_details.csv",
    first_kernel_id: int = 0,
    step_of: Callable[[list[int | None]], list[int | None]] | None = None,
) -> int:
    """kernels (+ kernel_metrics) from kernel_details.csv or msprof's op_summary (``kind``), ids from
    ``first_kernel_id`` (sliced files continue the numbering); returns the number of kernels.
    ``step_of``: steps of the start times, for files without a step column (msprof's op_summary).
    Read in chunks of rows; only what the L2 join needs (ids, stream, task, name, start) is kept."""
    index: dict[str, list[Any]] = {"kernel_id": [], "name": [], "stream_id": [], "task_id": [], "ts_ns": []}
    complete = False
    n_kernels = 0
    with ctx.reading(path, kind) as outcome:
        for t in iter_csv(path, kind, KERNEL_COLS, required=("name", "start", "dur"), keep_extra=True):
            n = t.n_rows
            n_kernels += n
            kid0 = first_kernel_id + t.first_row
            names = t.text("name")
            op_type = t.text("type")
            core = t.text("core")
            is_comm = [
                (c or "").upper() in ("HCCL", "COMMUNICATION")
                or (nm or "").startswith("hcom_")
                or (ot or "").startswith("hcom_")
                for nm, ot, c in zip(names, op_type, core)
            ]
            ts = t.ns_from_us("start")
            dur = t.ns_from_us("dur")
            steps = t.ints("step")
            if step_of is not None and all(s is None for s in steps):
                steps = step_of(ts)
            dev = t.ints("device")
            st.device_ids.update(d for d in dev if d is not None)
            stream = t.ints("stream")
            task = t.ints("task")
            ids = list(range(kid0, kid0 + n))
            rows = {
                "kernel_id": ids,
                "step": steps,
                "name": names,
                "op_type": op_type,
                "core_type": core,
                "is_communication": is_comm,
                "device_id": dev,
                "stream_id": stream,
                "task_id": task,
                "ts_ns": ts,
                "dur_ns": dur,
                "wait_ns": t.ns_from_us("wait"),
                "block_dim": t.ints("block"),
                "mix_block_dim": t.ints("mix_block"),
                "op_state": t.text("state"),
                "input_shapes": t.text("in_shapes"),
                "input_dtypes": t.text("in_dtypes"),
                "input_formats": t.text("in_formats"),
                "output_shapes": t.text("out_shapes"),
                "output_dtypes": t.text("out_dtypes"),
                "output_formats": t.text("out_formats"),
            }
            outcome.rows += ctx.write("kernels", rows)
            outcome.rows += _write_metrics(ctx, st, t, kid0)
            _outcome_warnings(outcome, t.warnings)
            for i in range(n):
                if is_comm[i]:
                    st.kernel_comm.append({"name": names[i], "step": steps[i], "ts": ts[i], "dur": dur[i]})
            if l2_path is not None:
                for k, v in (
                    ("kernel_id", ids),
                    ("name", names),
                    ("stream_id", stream),
                    ("task_id", task),
                    ("ts_ns", ts),
                ):
                    index[k].extend(v)
        complete = True
    if l2_path is not None:
        with ctx.reading(l2_path, "l2_cache.csv") as outcome:
            if not complete:
                raise InputError(str(l2_path), f"not read: {kind} could not be read, so L2 rates cannot be joined")
            outcome.rows = _read_l2(ctx, st, l2_path, index, outcome)
    return n_kernels


def _write_metrics(ctx: ReadContext, st: TextExport, t: CsvTable, first_kernel_id: int = 0) -> int:
    """PMU columns of one chunk of kernel rows -> kernel_metrics (long form), ids from ``first_kernel_id``."""
    parts: list[pa.Table] = []
    for header, cells in t.extra.items():
        name, factor = metric_name(header)
        sub = CsvTable(t.path, t.header, {"v": cells}, {}, t.n_rows)
        vals = pa.array(sub.floats("v"), pa.float64())  # N/A and non-numbers (e.g. text columns) -> null
        idx = pc.indices_nonzero(pc.is_valid(vals))
        if len(idx) == 0:
            continue
        parts.append(
            pa.table(
                {
                    "kernel_id": pc.add(pc.cast(idx, pa.int64()), first_kernel_id),
                    "metric": pa.repeat(pa.scalar(name, pa.string()), len(idx)),
                    "value": pc.multiply(pc.take(vals, idx), factor),
                }
            )
        )
    if not parts:
        return 0
    st.kernel_metrics = True
    return ctx.write("kernel_metrics", pa.concat_tables(parts))


def _read_l2(ctx: ReadContext, st: TextExport, path: Path, k: dict[str, list[Any]], outcome: Any) -> int:
    t = read_csv(path, "l2_cache.csv", L2_COLS, required=("hit", "victim"))
    _outcome_warnings(outcome, t.warnings)
    by_task: dict[tuple[int, int], list[int]] = defaultdict(list)
    by_name: dict[str, list[int]] = defaultdict(list)
    order = sorted(range(len(k["kernel_id"])), key=lambda i: (k["ts_ns"][i] is None, k["ts_ns"][i] or 0, i))
    for i in order:
        if k["stream_id"][i] is not None and k["task_id"][i] is not None:
            by_task[(k["stream_id"][i], k["task_id"][i])].append(i)
        if k["name"][i]:
            by_name[k["name"][i]].append(i)
    used: set[int] = set()
    streams, tasks, names = t.ints("stream"), t.ints("task"), t.text("name")
    hits, victims = t.floats("hit"), t.floats("victim")
    kid: list[int] = []
    metric: list[str] = []
    value: list[float] = []
    unmatched = 0
    for j in range(t.n_rows):
        cand = by_task.get((streams[j], tasks[j])) if streams[j] is not None and tasks[j] is not None else None
        if not cand and names[j]:
            cand = by_name.get(names[j])
        hit = None
        if cand:
            named = [i for i in cand if i not in used and (names[j] is None or k["name"][i] == names[j])]
            pick = named or [i for i in cand if i not in used]
            hit = pick[0] if pick else None
        if hit is None:
            unmatched += 1
            continue
        used.add(hit)
        for m, v in (("l2_hit_rate", hits[j]), ("l2_victim_rate", victims[j])):
            if v is not None:
                kid.append(k["kernel_id"][hit])
                metric.append(m)
                value.append(v)
    if unmatched:
        outcome.warn(
            f"{unmatched} of {t.n_rows} rows match no kernel of kernel_details.csv (by stream/task id or name); skipped"
        )
    if kid:
        st.l2 = True
    return ctx.write("kernel_metrics", {"kernel_id": kid, "metric": metric, "value": value}) if kid else 0


def _read_op_details(ctx: ReadContext, st: TextExport, path: Path) -> None:
    """Rows numbered per name in file (= start) order, for the join with the trace's ops in _finish.
    Shapes and stacks are kept only when there is no trace to take them from."""
    keep_text = st.router is None
    with ctx.reading(path, "operator_details.csv") as outcome:
        seen: Counter[str | None] = Counter()
        parts: list[pa.Table] = []
        for t in iter_csv(path, "operator_details.csv", OPDETAIL_COLS, required=("name", "host_total")):
            _outcome_warnings(outcome, t.warnings)
            names = t.text("name")
            rn: list[int] = []
            for nm in names:
                rn.append(seen[nm])
                seen[nm] += 1
            parts.append(
                pa.table(
                    {
                        "name": pa.array(names, pa.string()),
                        "rn": pa.array(rn, pa.int64()),
                        "host_self_ns": pa.array(t.ns_from_us("host_self"), pa.int64()),
                        "host_total_ns": pa.array(t.ns_from_us("host_total"), pa.int64()),
                        "device_self_ns": pa.array(t.ns_from_us("dev_self"), pa.int64()),
                        "device_total_ns": pa.array(t.ns_from_us("dev_total"), pa.int64()),
                        "input_shapes": pa.array(t.text("shapes") if keep_text else [None] * t.n_rows, pa.string()),
                        "call_stack": pa.array(
                            [stack_text(x) for x in t.text("stack")] if keep_text else [None] * t.n_rows, pa.string()
                        ),
                    }
                )
            )
            outcome.rows += t.n_rows
        st.op_details = pa.concat_tables(parts)
        st.op_details_path = path


def _read_step_trace(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "step_trace_time.csv") as outcome:
        t = read_csv(path, "step_trace_time.csv", STEP_TRACE_COLS, required=("computing", "communication", "free"))
        cols: dict[str, Any] = {"step": t.ints("step")}
        for key, col in (
            ("computing", "computing_ns"),
            ("comm_not_overlapped", "comm_not_overlapped_ns"),
            ("overlapped", "overlapped_ns"),
            ("communication", "communication_ns"),
            ("free", "free_ns"),
            ("stage", "stage_ns"),
            ("bubble", "bubble_ns"),
            ("comm_not_overlapped_excl_receive", "comm_not_overlapped_excl_receive_ns"),
            ("preparing", "preparing_ns"),
        ):
            cols[col] = t.ns_from_us(key)
        _outcome_warnings(outcome, t.warnings)
        outcome.rows = ctx.write("step_trace", cols)


def _read_op_statistic(ctx: ReadContext, path: Path, kind: str = "op_statistic.csv") -> None:
    with ctx.reading(path, kind) as outcome:
        t = read_csv(path, kind, OP_STAT_COLS, required=("type", "count", "total"))
        _outcome_warnings(outcome, t.warnings)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["op_statistic"] * t.n_rows,
                "name": t.text("type"),
                "core_type": t.text("core"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "ratio_pct": t.floats("ratio"),
            },
        )


def _read_api_statistic(ctx: ReadContext, path: Path, kind: str = "api_statistic.csv") -> None:
    with ctx.reading(path, kind) as outcome:
        t = read_csv(path, kind, API_STAT_COLS, required=("name", "count", "total"))
        _outcome_warnings(outcome, t.warnings)
        var = t.floats("variance")
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["api_statistic"] * t.n_rows,
                "level": t.text("level"),
                "name": t.text("name"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "variance_ns2": [v * 1e6 if v is not None else None for v in var],
            },
        )


def _sections(data: Any, path: Path, kind: str) -> list[tuple[int | None, bool, dict[str, Any]]]:
    """(step, is_p2p, {op key: value}) sections of communication*.json."""
    if not isinstance(data, dict):
        raise InputError(str(path), f"not {a_or_an(kind)}: the JSON is not an object keyed by step")
    out = []
    for step_key, body in data.items():
        if not isinstance(body, dict):
            continue
        step = step_from_key(str(step_key))
        for part in ("collective", "p2p"):
            sec = body.get(part)
            if isinstance(sec, dict):
                out.append((step, part == "p2p", sec))
    if data and not out:
        raise InputError(str(path), f"not {a_or_an(kind)}: no step with 'collective' / 'p2p' sections")
    return out


def _read_communication(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "communication.json") as outcome:
        data = load_json(path, "communication.json")
        bw: dict[str, list[Any]] = defaultdict(list)
        for step, p2p, sec in _sections(data, path, "communication.json"):
            for key, op in sec.items():
                if key == "Total Op Info" or not isinstance(op, dict):
                    continue
                name, h = split_op_key(key)
                ti = op.get("Communication Time Info") or {}
                st.comm_times.append(
                    CommTime(
                        name=name,
                        group=h,
                        step=step,
                        is_p2p=p2p,
                        start_us=_num(ti.get("Start Timestamp(us)")),
                        elapse_ns=ms_ns(ti.get("Elapse Time(ms)")),
                        transit_ns=ms_ns(ti.get("Transit Time(ms)")),
                        wait_ns=ms_ns(ti.get("Wait Time(ms)")),
                        sync_ns=ms_ns(ti.get("Synchronization Time(ms)")),
                        idle_ns=ms_ns(ti.get("Idle Time(ms)")),
                    )
                )
                if h is not None:
                    st.groups.get(h)  # type: ignore[union-attr]
                for transport, info in (op.get("Communication Bandwidth Info") or {}).items():
                    if not isinstance(info, dict):
                        continue
                    size, tm = _num(info.get("Transit Size(MB)")), _num(info.get("Transit Time(ms)"))
                    if not size and not tm:
                        continue  # transport not used by this op
                    base = {"step": step, "op_name": name, "group_name": h, "transport": transport}
                    rows = [(None, None, None)]
                    dist = info.get("Size Distribution") or {}
                    if isinstance(dist, dict):
                        for pkt, val in dist.items():
                            cnt, ptm = (val[0], val[1]) if isinstance(val, list) and len(val) >= 2 else (val, None)
                            rows.append((mb_bytes(_num(pkt)), _num(cnt), ms_ns(ptm)))
                    for pkt_bytes, cnt, ptm in rows:
                        for k2, v2 in base.items():
                            bw[k2].append(v2)
                        bw["bytes"].append(mb_bytes(size))
                        bw["transit_ns"].append(ms_ns(tm))
                        bw["bandwidth_bytes_per_s"].append(gbps(info.get("Bandwidth(GB/s)")))
                        bw["large_packet_ratio"].append(_num(info.get("Large Packet Ratio")))
                        bw["packet_size_bytes"].append(pkt_bytes)
                        bw["packet_count"].append(int(cnt) if cnt is not None else None)
                        bw["packet_transit_ns"].append(ptm)
        outcome.rows = len(st.comm_times)
        if bw:
            outcome.rows += ctx.write("comm_bandwidth", dict(bw))
        if not st.comm_times:
            outcome.warn("no communication operation in the file (empty collective / p2p sections)")


def _read_matrix(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "communication_matrix.json") as outcome:
        data = load_json(path, "communication_matrix.json")
        entries = []
        for step, p2p, sec in _sections(data, path, "communication_matrix.json"):
            for key, links in sec.items():
                if key == "Total Op Info" or not isinstance(links, dict):
                    continue
                op_key, h = split_op_key(key)
                for lk, info in links.items():
                    if not isinstance(info, dict):
                        continue
                    src, dst = parse_link_key(str(lk))
                    entries.append(
                        {
                            "step": step,
                            "op_key": op_key,
                            "op_name": info.get("Op Name") or (op_key if op_key.startswith("hcom_") else None),
                            "group": h,
                            "is_p2p": p2p,
                            "src": src,
                            "dst": dst,
                            "transport": info.get("Transport Type"),
                            "size_mb": info.get("Transit Size(MB)"),
                            "time_ms": info.get("Transit Time(ms)"),
                            "bw_gbps": info.get("Bandwidth(GB/s)"),
                        }
                    )
        rows = link_rows(entries, st.groups)  # type: ignore[arg-type]
        outcome.rows = ctx.write("comm_links", pa.Table.from_pylist(rows)) if rows else 0
        if not rows:
            outcome.warn("no communication link in the file (empty collective / p2p sections)")


def _read_memory_record(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "memory_record.csv") as outcome:
        for t in iter_csv(path, "memory_record.csv", MEM_RECORD_COLS, required=("component", "ts")):
            dev = t.text("device")
            st.device_ids.update(x for x in (_device_id(d) for d in set(dev)) if x is not None)
            outcome.rows += ctx.write(
                "memory_samples",
                {
                    "ts_ns": t.ns_from_us("ts"),
                    "component": t.text("component"),
                    "device": dev,
                    "allocated_bytes": _mb_list(t, "allocated"),
                    "reserved_bytes": _mb_list(t, "reserved"),
                    "active_bytes": _mb_list(t, "active"),
                    "stream_ptr": t.ints("stream_ptr"),
                    "source": ["memory_record"] * t.n_rows,
                },
            )
            _outcome_warnings(outcome, t.warnings)


def _read_module_mem(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "npu_module_mem.csv") as outcome:
        for t in iter_csv(path, "npu_module_mem.csv", MODULE_MEM_COLS, required=("component", "ts", "reserved")):
            outcome.rows += ctx.write(
                "memory_samples",
                {
                    "ts_ns": t.ns_from_us("ts"),
                    "component": t.text("component"),
                    "device": t.text("device"),
                    "reserved_bytes": _mb_list(t, "reserved"),
                    "source": ["npu_module_mem"] * t.n_rows,
                },
            )
            _outcome_warnings(outcome, t.warnings)


def _read_operator_memory(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "operator_memory.csv") as outcome:
        for t in iter_csv(path, "operator_memory.csv", OP_MEM_COLS, required=("name", "size", "alloc")):
            size = t.floats("size")
            outcome.rows += ctx.write(
                "operator_memory",
                {
                    "name": t.text("name"),
                    "size_bytes": [round(v * 1024) if v is not None else None for v in size],
                    "alloc_ns": t.ns_from_us("alloc"),
                    "release_ns": t.ns_from_us("release"),
                    "active_release_ns": t.ns_from_us("active_release"),
                    "duration_ns": t.ns_from_us("duration"),
                    "active_duration_ns": t.ns_from_us("active_duration"),
                    "alloc_allocated_bytes": _mb_list(t, "a_alloc"),
                    "alloc_reserved_bytes": _mb_list(t, "a_res"),
                    "alloc_active_bytes": _mb_list(t, "a_act"),
                    "release_allocated_bytes": _mb_list(t, "r_alloc"),
                    "release_reserved_bytes": _mb_list(t, "r_res"),
                    "release_active_bytes": _mb_list(t, "r_act"),
                    "stream_ptr": t.ints("stream_ptr"),
                    "device": t.text("device"),
                },
            )
            _outcome_warnings(outcome, t.warnings)


# ---------------------------------------------------------------------------------------------
# finishing: operators (self time, steps, device times), steps, counters, comm ops, lanes, meta
# ---------------------------------------------------------------------------------------------


def _finish(ctx: ReadContext, st: TextExport) -> None:
    staged = st.stage.close()
    router = st.router
    steps = _write_steps(ctx, router)
    con = duckdb.connect(":memory:")
    try:
        con.register(
            "steps",
            pa.table(
                {
                    "step": pa.array([s[0] for s in steps], pa.int32()),
                    "start_ns": pa.array([s[1] for s in steps], pa.int64()),
                    "end_ns": pa.array([s[2] for s in steps], pa.int64()),
                }
            ),
        )
        if "operators" in staged:
            _write_operators(ctx, st, con, staged["operators"])
        elif st.op_details is not None:
            _operators_from_details(ctx, st)
        if "counters" in staged and router is not None:
            names = pa.table(
                {
                    "_pid": pa.array(list(router.lanes.process_names.keys()), pa.string()),
                    "process": pa.array(list(router.lanes.process_names.values()), pa.string()),
                }
            )
            con.register("pnames", names)
            p = staged["counters"].replace("'", "''")
            rdr = con.sql(
                f"SELECT coalesce(n.process, c._pid) AS process, c.name, c.series, c.ts_ns, c.value "
                f"FROM read_parquet('{p}') c LEFT JOIN pnames n USING (_pid) ORDER BY c.ts_ns"
            ).to_arrow_reader(200_000)
            for batch in rdr:
                ctx.write("counters", batch)
    finally:
        con.close()
    if router is not None:
        ctx.write("lanes", router.lane_rows())
        if router.device_tasks:  # no kernel_details.csv: the kernels of the Ascend Hardware lanes
            ctx.write("kernels", router.device_tasks.columns(0, lambda ts: last_step_started(steps, ts)))
    _write_comm_ops(ctx, st, steps)
    groups = st.groups
    if groups is not None:
        groups.finish()
        rows = groups.rows()
        if rows:
            ctx.write("comm_groups", pa.Table.from_pylist(rows))
    _fill_text_meta(ctx, st)


def _write_steps(ctx: ReadContext, router: TraceRouter | None) -> list[tuple[int, int, int]]:
    if router is None or not router.steps:
        return []
    by: dict[int, list[int]] = {}
    for step, s, e in router.steps:
        if step in by:
            by[step] = [min(by[step][0], s), max(by[step][1], e)]
        else:
            by[step] = [s, e]
    steps = sorted((k, v[0], v[1]) for k, v in by.items())
    ctx.write(
        "steps",
        {
            "step": [s[0] for s in steps],
            "start_ns": [s[1] for s in steps],
            "end_ns": [s[2] for s in steps],
            "dur_ns": [s[2] - s[1] for s in steps],
            "source": ["ProfilerStep"] * len(steps),
        },
    )
    return steps


def _write_operators(ctx: ReadContext, st: TextExport, con: duckdb.DuckDBPyConnection, path: str) -> None:
    p = path.replace("'", "''")
    ops = con.sql(
        f"SELECT _pid, tid, ts_ns, dur_ns, event_id FROM read_parquet('{p}') ORDER BY _pid, tid, ts_ns, dur_ns DESC, event_id"
    ).to_arrow_table()
    con.register("selftime", self_time(ops))
    del ops
    details = st.op_details
    if details is None:
        details = pa.table(
            {
                "name": pa.array([], pa.string()),
                "rn": pa.array([], pa.int64()),
                "host_total_ns": pa.array([], pa.int64()),
                "device_self_ns": pa.array([], pa.int64()),
                "device_total_ns": pa.array([], pa.int64()),
            }
        )
    con.register("details", details.select(["name", "rn", "host_total_ns", "device_self_ns", "device_total_ns"]))
    con.execute(
        f"""
        CREATE TABLE ops AS
        SELECT o.*, CASE WHEN o.name LIKE 'ProfilerStep#%' THEN NULL ELSE
                    row_number() OVER (PARTITION BY o.name, o.name LIKE 'ProfilerStep#%' ORDER BY o.ts_ns, o.dur_ns DESC, o.event_id) - 1 END AS rn
        FROM read_parquet('{p}') o
        """
    )
    match = con.execute(
        """
        SELECT count(*) FILTER (WHERE d.name IS NOT NULL),
               count(*) FILTER (WHERE d.name IS NOT NULL AND abs(d.host_total_ns - o.dur_ns) > 1000)
        FROM ops o LEFT JOIN details d ON d.name = o.name AND d.rn = o.rn
        """
    ).fetchall()[0]
    cols = schema.FACTS["operators"].column_names[3:]
    rep = {
        "step": "CASE WHEN o.ts_ns < st.end_ns THEN st.step END",
        "self_ns": "x.self_ns",
        "depth": "x.depth",
        "device_self_ns": "CASE WHEN abs(d.host_total_ns - o.dur_ns) <= 1000 THEN d.device_self_ns END",
        "device_total_ns": "CASE WHEN abs(d.host_total_ns - o.dur_ns) <= 1000 THEN d.device_total_ns END",
    }
    sel = ", ".join(f'{rep[c]} AS "{c}"' if c in rep else f'o."{c}"' for c in cols if c in rep or c in _OP_STAGED)
    rdr = con.sql(
        f"""
        SELECT {sel} FROM ops o
        LEFT JOIN selftime x USING (event_id)
        LEFT JOIN details d ON d.name = o.name AND d.rn = o.rn
        ASOF LEFT JOIN steps st ON o.ts_ns >= st.start_ns
        ORDER BY o.ts_ns, o.event_id
        """
    ).to_arrow_reader(200_000)
    for batch in rdr:
        ctx.write("operators", batch)
    if st.op_details is not None and st.op_details_path is not None:
        matched, bad = match or (0, 0)
        n = st.op_details.num_rows
        oc = ctx.outcomes.get(st.op_details_path)
        if oc is not None and oc.status != "error":
            attached = matched - bad
            if attached < n:
                oc.warn(
                    f"device times of {attached} of {n} operators attached: {n - matched} row(s) match no trace "
                    f"operator by name and order, {bad} disagree with the trace's host duration by more than 1 µs"
                )


_OP_STAGED = {
    "name",
    "category",
    "tid",
    "ts_ns",
    "dur_ns",
    "input_shapes",
    "input_types",
    "call_stack",
    "sequence_number",
    "event_id",
}


def _operators_from_details(ctx: ReadContext, st: TextExport) -> None:
    """No trace_view.json: operators from operator_details.csv (durations, stacks, no timestamps)."""
    d = st.op_details
    assert d is not None
    n = d.num_rows
    ctx.write(
        "operators",
        {
            "name": d.column("name"),
            "category": pa.array(["cpu_op"] * n, pa.string()),
            "dur_ns": d.column("host_total_ns"),
            "self_ns": d.column("host_self_ns"),
            "input_shapes": d.column("input_shapes"),
            "call_stack": d.column("call_stack"),
            "device_self_ns": d.column("device_self_ns"),
            "device_total_ns": d.column("device_total_ns"),
            "event_id": pa.array(np.arange(n), pa.int64()),
        },
    )
    if st.op_details_path is not None:
        oc = ctx.outcomes.get(st.op_details_path)
        if oc is not None:
            oc.warn("trace_view.json is missing: operators written from this file, without timestamps")


def _write_comm_ops(ctx: ReadContext, st: TextExport, steps: list[tuple[int, int, int]]) -> None:
    router = st.router
    trace_ops = router.big_comm_ops() if router is not None else []
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in sorted(trace_ops, key=lambda h: us_text_to_ns(str(h["ts"])) or 0 if h["ts"] is not None else 0):
        by_trace[h["name"]].append(h)
    by_time: dict[str, list[CommTime]] = defaultdict(list)
    for c in st.comm_times:
        by_time[c.name].append(c)
    base: list[dict[str, Any]] = []
    if st.kernel_comm:
        base = [dict(k, source="kernel_details.csv") for k in st.kernel_comm]
    elif trace_ops:
        for h in trace_ops:
            ts = us_text_to_ns(h["ts"]) if isinstance(h["ts"], str) else _ns_us_float(h["ts"])
            base.append(
                {"name": h["name"], "step": None, "ts": ts, "dur": _ns_us_float(h["dur"]), "source": "trace_view.json"}
            )
    else:
        for c in st.comm_times:
            base.append(
                {
                    "name": c.name,
                    "step": c.step,
                    "ts": _ns_us_float(c.start_us),
                    "dur": c.elapse_ns,
                    "source": "communication.json",
                }
            )
    if not base:
        return
    base.sort(key=lambda b: (b["ts"] is None, b["ts"] or 0))
    taken_trace: Counter[str] = Counter()
    taken_time: Counter[str] = Counter()
    matched: list[tuple[dict[str, Any], dict[str, Any] | None, CommTime | None]] = []
    used: set[int] = set()
    for b in base:
        name = b["name"]
        tr_list = by_trace.get(name) or []
        tr = tr_list[taken_trace[name]] if taken_trace[name] < len(tr_list) else None
        taken_trace[name] += 1
        ct_list = by_time.get(name) or []
        ct = None
        if ct_list:
            same_step = [c for c in ct_list if b["step"] is not None and c.step == b["step"]]
            ct = (
                same_step[0]
                if len(same_step) == 1
                else (ct_list[taken_time[name]] if taken_time[name] < len(ct_list) else None)
            )
        taken_time[name] += 1
        if ct is not None:
            used.add(id(ct))
        matched.append((b, tr, ct))
    # ops that only communication.json knows (e.g. kernel_details.csv trimmed or cut): kept, float start
    from_json = not st.kernel_comm and not trace_ops  # then every communication.json op is in base already
    for c in st.comm_times:
        if id(c) not in used and not from_json:
            extra = {
                "name": c.name,
                "step": c.step,
                "ts": _ns_us_float(c.start_us),
                "dur": c.elapse_ns,
                "source": "communication.json",
            }
            matched.append((extra, None, c))
    matched.sort(key=lambda m: (m[0]["ts"] is None, m[0]["ts"] or 0))
    rows = []
    groups = st.groups
    for b, tr, ct in matched:
        name = b["name"]
        op_type = normalize_op_type(name)
        step = b["step"]
        if step is None and ct is not None:
            step = ct.step
        if step is None and b["ts"] is not None:
            step = _step_of(b["ts"], steps)
        g = groups.get(ct.group) if (groups is not None and ct is not None and ct.group) else None
        dtype = tr["dtype"] if tr else None
        count = tr["count"] if tr else None
        rows.append(
            {
                "step": step,
                "name": name,
                "op_type": op_type,
                "group_name": g.hash if g else None,
                "group_ranks": None,  # filled after the layouts are complete
                "is_p2p": (ct.is_p2p if ct is not None else False) or op_type in P2P_TYPES,
                "ts_ns": b["ts"],
                "dur_ns": b["dur"] if b["dur"] is not None else (ct.elapse_ns if ct else None),
                "transit_ns": ct.transit_ns if ct else None,
                "wait_ns": ct.wait_ns if ct else None,
                "sync_ns": ct.sync_ns if ct else None,
                "idle_ns": ct.idle_ns if ct else None,
                "bytes": hccl_bytes(dtype, count),
                "dtype": dtype,
                "count": int(count) if count is not None else None,
                "alg_type": tr["alg"] if tr else None,
                "source": b["source"]
                + ("+communication.json" if ct is not None and b["source"] != "communication.json" else ""),
            }
        )
    if groups is not None:
        groups.finish()
        for r in rows:
            if r["group_name"]:
                g = groups.get(r["group_name"])
                r["group_ranks"] = g.global_ranks if g else None
    ctx.write("comm_ops", pa.Table.from_pylist(rows))


def _step_of(ts: int, steps: list[tuple[int, int, int]]) -> int | None:
    for step, s, e in steps:
        if s <= ts < e:
            return step
    return None


def _fill_text_meta(ctx: ReadContext, st: TextExport) -> None:
    fill_meta(ctx, st.pf)
    m = ctx.meta
    if len(st.device_ids) == 1:
        m.device_id = next(iter(st.device_ids))
    router = st.router
    if router is not None:
        if router.has_stacks:
            m.capabilities.add("stacks")
        if router.has_shapes:
            m.capabilities.add("shapes")
        if router.cann_levels:
            m.capabilities.add("cann_api")
            m.extra["cann_api_events"] = dict(router.cann_levels)
        if router.cann_levels.get("Runtime"):
            m.capabilities.add("runtime_api")
    if st.l2:
        m.capabilities.add("l2_cache")
    if "trace_view.json" not in st.files:
        m.missing.append("no trace_view.json: no timeline, no operator timestamps or self time from nesting")
    if "kernel_details.csv" not in st.files:
        if router is not None and router.device_tasks:
            m.missing.append(
                "no kernel_details.csv: kernels taken from trace_view.json's Ascend Hardware lanes "
                "(no op types, shapes or PMU metrics)"
            )
        else:
            m.missing.append("no kernel_details.csv: no device kernels")
    switch_sentences(ctx, st.pf)


# shared with the msprof reader (op_summary / op_statistic / api_statistic of a PROF_* export)
read_kernel_csv = _read_kernels
read_op_statistic = _read_op_statistic
read_api_statistic = _read_api_statistic
