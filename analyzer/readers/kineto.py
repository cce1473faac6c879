"""Kineto / torch.profiler chrome traces (``*.json``, ``*.json.gz``), new and old category names.

One pass over the events (streamed, see chrome_trace) routes them:

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
older Kineto writes after the events) are staged in scratch Arrow IPC files and finished at the
end with numpy (a sort for self time, binary searches for steps and memory blocks), read back
batch by batch, so memory stays bounded by the block size plus a few integer columns.
"""

from __future__ import annotations

import re
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from ..errors import InputError
from ..factwriter import conform
from ..vocabulary import P2P_TYPES, is_comm_annotation, normalize_op_type
from .base import SIDECAR_NAME, ReadContext, register
from .chrome.columns import Codes, EventColumns, field_values, id_column, id_text, raw_text_array, times_ns
from .chrome.lanes import LaneRules
from .chrome.nesting import depth_and_self
from .chrome.router import EventRouter, RoutedBlock, RouteRules, where
from .chrome.stream import ANY, NO_RAW, Event, TraceStream, open_binary, sniff
from .common.jsonfile import decode_or_none
from .common.spill import SpillStage, Staged

OP_CATS = {"cpu_op", "user_annotation", "Operator"}
KERNEL_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events"}
DEVICE_CATS = KERNEL_CATS | {"gpu_user_annotation", "cuda_sync"}
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# Kineto lanes: a lane of mostly device categories is a device stream; the Spans / Traces pseudo
# processes are "other"; a process labelled GPU / NPU is a device; anything else is a host thread
LANES = LaneRules(
    default="host",
    device_categories=frozenset(DEVICE_CATS),
    other_ids=frozenset({"Spans", "Traces", ""}),
    other_processes=frozenset({"Spans", "Traces"}),
    labels=(("GPU", "device"), ("NPU", "device")),
)
TRACE_SUFFIXES = (".json", ".json.gz")
ROUTE = RouteRules(LANES, op_categories=frozenset(OP_CATS), held_instants=frozenset({"[memory]"}))


class OpArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    seq: int | None = msgspec.field(default=None, name="Sequence number")


class CommArgs(msgspec.Struct, gc=False):
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    dtype: str | None = None
    group_size: int | None = msgspec.field(default=None, name="Group size")
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: str | list[int] | None = msgspec.field(default=None, name="Process Group Ranks")
    input_dims: list[Any] | None = msgspec.field(default=None, name="Input Dims")
    input_type: list[Any] | None = msgspec.field(default=None, name="Input type")
    device: int | None = None
    stream: int | None = None


class KernelArgs(msgspec.Struct, gc=False):
    device: int | None = None
    stream: int | None = None


class MemArgs(msgspec.Struct, gc=False):
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")


_OP_DEC = msgspec.json.Decoder(OpArgs)
_COMM_DEC = msgspec.json.Decoder(CommArgs)
_KERNEL_DEC = msgspec.json.Decoder(KernelArgs)
_MEM_DEC = msgspec.json.Decoder(MemArgs)

_OPS_DEC = msgspec.json.Decoder(list[OpArgs | None])
_OP_LINES = msgspec.json.Decoder(OpArgs)
_MEMS_DEC = msgspec.json.Decoder(list[MemArgs | None])
_NO_OP_ARGS = OpArgs()
_NO_MEM_ARGS = MemArgs()
_GET_DEVICE = attrgetter("device_type", "device_id")
_GET_BYTES = attrgetter("bytes")
_GET_ALLOCATED = attrgetter("total_allocated")
_GET_RESERVED = attrgetter("total_reserved")
_GET_ADDR = attrgetter("addr")
_GET_DIMS = attrgetter("input_dims")
_GET_TYPES = attrgetter("input_type")
_GET_STACK = attrgetter("call_stack")
_GET_SEQ = attrgetter("seq")
_KERNEL_CATS = pa.array(sorted(KERNEL_CATS), pa.string())


def _device_name(device_type: int | None, device_id: int | None) -> str:
    kind = _DEVICE_TYPES.get(device_type if device_type is not None else -1, str(device_type))
    return kind if kind == "CPU" or device_id is None or device_id < 0 else f"{kind}:{device_id}"


def _op_args(args: pa.Array) -> list[OpArgs] | None:
    """The ops' args decoded straight from the timeline's args column: its values lie back to back
    in one buffer, which msgspec reads as a sequence of JSON documents. None if an op has no args
    or one does not decode (the caller then goes event by event)."""
    if not len(args) or args.null_count:
        return None
    offsets = np.frombuffer(args.buffers()[1], dtype=np.int32)
    start, end = int(offsets[args.offset]), int(offsets[args.offset + len(args)])
    try:
        out = _OP_LINES.decode_lines(memoryview(args.buffers()[2])[start:end])
    except msgspec.DecodeError:
        return None
    return out if len(out) == len(args) else None


def _decode_many(many: msgspec.json.Decoder, one: msgspec.json.Decoder, raws: list[msgspec.Raw]) -> list[Any]:
    """Decode many raw ``args`` objects in one call (an absent one decodes to None); if the batch
    does not decode (one object with an unexpected type), fall back to one by one."""
    if not raws:
        return []
    if all(map(len, raws)):
        joined = b",".join(raws)
    else:
        joined = b",".join([r if len(r) else b"null" for r in raws])
    try:
        return many.decode(b"[" + joined + b"]")
    except msgspec.DecodeError:
        return [decode_or_none(one, r) for r in raws]


_DEVICE_TYPES = {0: "CPU", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 20: "privateuse1"}


def _parse_ranks(v: str | list[int] | None) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, list):
        return [int(x) for x in v]
    try:
        out = ANY.decode(v.encode())
        return [int(x) for x in out] if isinstance(out, list) else None
    except (msgspec.DecodeError, ValueError, TypeError):
        return None


# bytes per element of the torch dtype names Kineto writes (Input type, dtype args)
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "unsigned int": 4,
    "double": 8,
    "float64": 8,
    "long": 8,
    "int64": 8,
    "long int": 8,
    "uint64": 8,
    "complex64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "short": 2,
    "int16": 2,
    "uint16": 2,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "char": 1,
    "byte": 1,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "signed char": 1,
    "unsigned char": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex128": 16,
}


def dtype_size(dtype: str | None) -> int | None:
    if not dtype:
        return None
    return DTYPE_BYTES.get(dtype.strip().lower())


def _message_bytes(args: CommArgs | None) -> tuple[int | None, str | None, int | None]:
    """(bytes, dtype, element count) of a collective from its args."""
    if args is None:
        return None, None, None
    if args.in_nelems is not None:
        size = dtype_size(args.dtype)
        n = max(args.in_nelems or 0, args.out_nelems or 0)
        return (n * size if size else None), args.dtype, n
    if args.input_dims:
        # gloo:* annotations: Input Dims = [[d0, d1, ...], ...], Input type = ['float', ...]
        total = 0
        count = 0
        dtype = None
        for i, dims in enumerate(args.input_dims):
            if not isinstance(dims, list) or not dims or not all(isinstance(d, int) for d in dims):
                continue
            n = int(np.prod(dims))
            t = args.input_type[i] if args.input_type and i < len(args.input_type) else None
            size = dtype_size(t if isinstance(t, str) else None)
            if size:
                total += n * size
                count += n
                dtype = dtype or t
        return (total or None), dtype, (count or None)
    return None, args.dtype, None


_STAGE_KEY = {"run": "", "rank": 0, "collection_id": ""}


def _staged(table: str, cols: dict[str, Any], file_idx: int) -> pa.Table:
    t = conform(table, cols, _STAGE_KEY)
    return t.append_column("_file", pa.repeat(pa.scalar(file_idx, pa.int32()), t.num_rows))


class KinetoPicker:
    """Kineto's rows of each routed block: operators (self time later), ProfilerStep ranges, kernels,
    collectives, process groups, memory events and counters, staged for the end of the files."""

    def __init__(self, ctx: ReadContext, stage: SpillStage):
        self.ctx = ctx
        self.stage = stage
        self.file_idx = 0  # the file being routed (its index in the collection's sorted traces)
        self.direct_slices = True  # slices written at once (False: staged until the file's time base is known)
        self.comm_kernel_rows = 0
        self.groups: dict[str, dict[str, Any]] = {}
        self.has_stacks = False
        self.has_shapes = False

    def write_slices(self, sl: dict[str, pa.Array]) -> None:
        if self.direct_slices:
            self.ctx.write("slices", sl)
        else:
            self.stage.write("slices", _staged("slices", sl, self.file_idx))

    def block(self, router: EventRouter, b: RoutedBlock) -> None:
        """Every table takes its rows from the router's columns through masks — no per-event Python
        loop except over the rare kinds (step markers, annotations, kernels, memory events)."""
        events, first, base_ns, file_idx = b.events, b.first, b.base_ns, self.file_idx
        comm_idx = np.zeros(0, dtype=np.int64)
        steps: list[tuple[int, int]] = []
        k_idx = np.zeros(0, dtype=np.int64)
        cols = b.cols
        if cols is not None:
            cat = cols.cat
            if not self.has_stacks:  # with_stack in newer torch: python_function frames, no Call stack arg
                self.has_stacks = bool(pc.any(pc.fill_null(pc.equal(cat, "python_function"), False)).as_py())
            op_mask, op_idx = b.op_mask, b.op_idx
            if len(op_idx):
                op_names = cols.name.filter(op_mask)
                is_step = pc.starts_with(op_names, "ProfilerStep#")
                for j in where(is_step).tolist():
                    i = int(op_idx[j])
                    m = _STEP_RE.match(events[i].name)
                    if m:
                        steps.append((i, int(m.group(1))))
                not_step = pc.invert(is_step)
                annotations = op_idx[where(pc.and_(not_step, pc.not_equal(cat.filter(op_mask), "cpu_op")))]
                comm_idx = np.array(
                    [i for i in annotations.tolist() if is_comm_annotation(events[i].name)], dtype=np.int64
                )
                notes = pc.and_(not_step, pc.equal(op_names, "record_param_comms"))
                for j in where(notes).tolist():
                    i = int(op_idx[j])
                    if not (events[i].cat != "cpu_op" and is_comm_annotation(events[i].name)):
                        self._note_group(events[i])
                self._ops(events, op_idx, cols, op_mask, file_idx)
            k_idx = b.sl_idx[where(pc.and_(b.x_sl, pc.is_in(cat, value_set=_KERNEL_CATS)))]
        if steps:
            self._steps(events, steps, file_idx, base_ns)
        if len(k_idx):
            self._kernels(events, k_idx.tolist(), first, file_idx, base_ns)
        if len(comm_idx):
            self._annotation_comms(events, comm_idx.tolist(), file_idx, base_ns)
        if len(b.held_idx):
            self._memory(events, b.held_idx, first, file_idx, base_ns)

    def counters(self, cols: dict[str, pa.Array]) -> None:
        cols["process"] = cols.pop("pid")
        self.stage.write("counters", _staged("counters", cols, self.file_idx))

    # -- per kind --------------------------------------------------------------------------------

    def _ops(self, events: list[Event], idx: np.ndarray, cols: EventColumns, mask: pa.Array, file_idx: int) -> None:
        args = _op_args(cols.args.filter(mask))
        if args is None:
            args = _decode_many(_OPS_DEC, _OP_DEC, field_values(list(map(events.__getitem__, idx.tolist())), "args"))
        present = [a if a is not None else _NO_OP_ARGS for a in args] if None in args else args
        shapes = raw_text_array(list(map(_GET_DIMS, present)))
        types = raw_text_array(list(map(_GET_TYPES, present)))
        stacks_py = list(map(_GET_STACK, present))
        if stacks_py.count(None) == len(stacks_py):
            stacks = pa.nulls(len(stacks_py), pa.string())
        else:
            raw = pa.array(stacks_py, pa.string())
            stacks = pc.if_else(
                pc.equal(raw, ""),
                pa.scalar(None, pa.string()),
                pc.utf8_trim_whitespace(pc.replace_substring(raw, ";", "\n")),
            )
            self.has_stacks = self.has_stacks or pc.any(pc.is_valid(stacks)).as_py()
        if not self.has_shapes:
            self.has_shapes = bool(pc.any(pc.fill_null(pc.not_equal(shapes, "[]"), False)).as_py())
        ops = {
            "name": cols.name.filter(mask),
            "category": cols.cat.filter(mask),
            "tid": cols.tid.filter(mask),
            "ts_ns": cols.ts_ns.filter(mask),
            "dur_ns": cols.dur_ns.filter(mask),
            "input_shapes": shapes,
            "input_types": types,
            "call_stack": stacks,
            "sequence_number": pa.array(list(map(_GET_SEQ, present)), pa.int64()),
            "event_id": cols.event_id.filter(mask),
        }
        t = _staged("operators", ops, file_idx)
        self.stage.write("operators", t.append_column("_pid", cols.pid.filter(mask)))

    def _steps(self, events: list[Event], steps: list[tuple[int, int]], file_idx: int, base_ns: int) -> None:
        evs = [events[i] for i, _ in steps]
        ts = times_ns([e.ts for e in evs], base_ns)
        dur = times_ns([e.dur if e.dur is not None else 0.0 for e in evs])
        end = pa.array(np.asarray(ts) + np.asarray(dur), pa.int64())
        cols = {
            "step": [s for _, s in steps],
            "start_ns": ts,
            "end_ns": end,
            "dur_ns": dur,
            "source": ["ProfilerStep"] * len(evs),
        }
        self.stage.write("steps", _staged("steps", cols, file_idx))

    def _kernels(self, events: list[Event], idx: list[int], first: int, file_idx: int, base_ns: int) -> None:
        evs = [events[i] for i in idx]
        comm_rows: list[int] = []
        comm_args: list[CommArgs] = []
        device, stream, is_comm = [], [], []
        for j, e in enumerate(evs):
            low = e.name.lower()
            comm = "nccl" in low or "rccl" in low or "hccl" in low
            is_comm.append(comm)
            if comm:
                a = decode_or_none(_COMM_DEC, e.args)
                if a is not None:
                    comm_rows.append(j)
                    comm_args.append(a)
                    device.append(a.device)
                    stream.append(a.stream)
                    continue
            ka = decode_or_none(_KERNEL_DEC, e.args)
            device.append(ka.device if ka else None)
            stream.append(ka.stream if ka else None)
        for j, e in enumerate(evs):
            if device[j] is None and isinstance(e.pid, int):
                device[j] = e.pid
            if stream[j] is None and isinstance(e.tid, int):
                stream[j] = e.tid
        cols = {
            "kernel_id": [first + i for i in idx],
            "name": [e.name for e in evs],
            "core_type": [e.cat for e in evs],
            "is_communication": is_comm,
            "device_id": device,
            "stream_id": stream,
            "ts_ns": times_ns([e.ts for e in evs], base_ns),
            "dur_ns": times_ns([e.dur if e.dur is not None else 0.0 for e in evs]),
        }
        self.stage.write("kernels", _staged("kernels", cols, file_idx))
        if comm_rows:
            self.comm_kernel_rows += len(comm_rows)
            sub = [evs[j] for j in comm_rows]
            self._comm_rows(sub, comm_args, file_idx, base_ns, "kineto:kernel")

    def _annotation_comms(self, events: list[Event], idx: list[int], file_idx: int, base_ns: int) -> None:
        evs = [events[i] for i in idx]
        self._comm_rows(evs, [decode_or_none(_COMM_DEC, e.args) for e in evs], file_idx, base_ns, "kineto:annotation")

    def _comm_rows(
        self, evs: list[Event], args: list[CommArgs | None], file_idx: int, base_ns: int, source: str
    ) -> None:
        names, types, groups, granks, p2p, nbytes, dtypes, counts = [], [], [], [], [], [], [], []
        for e, a in zip(evs, args):
            op = normalize_op_type(a.collective if a is not None and a.collective else e.name)
            b, dt, n = _message_bytes(a)
            g = None
            ranks = None
            if a is not None and a.pg_name is not None:
                g = str(a.pg_name)
                ranks = _parse_ranks(a.pg_ranks)
                self._remember_group(g, a.pg_desc, ranks)
            names.append(e.name)
            types.append(op)
            groups.append(g)
            granks.append(ranks)
            p2p.append(op in P2P_TYPES)
            nbytes.append(b)
            dtypes.append(dt)
            counts.append(n)
        cols = {
            "name": names,
            "op_type": types,
            "group_name": groups,
            "group_ranks": granks,
            "is_p2p": p2p,
            "ts_ns": times_ns([e.ts for e in evs], base_ns),
            "dur_ns": times_ns([e.dur if e.dur is not None else 0.0 for e in evs]),
            "bytes": nbytes,
            "dtype": dtypes,
            "count": counts,
            "source": [source] * len(evs),
        }
        t = _staged("comm_ops", cols, file_idx)
        t = t.append_column("_tid", pa.array([id_text(e.tid) for e in evs], pa.string()))
        self.stage.write("comm_ops", t)

    def _note_group(self, e: Event) -> None:
        a = decode_or_none(_COMM_DEC, e.args)
        if a is not None and a.pg_name is not None:
            self._remember_group(str(a.pg_name), a.pg_desc, _parse_ranks(a.pg_ranks))

    def _remember_group(self, name: str, desc: str | None, ranks: list[int] | None) -> None:
        g = self.groups.setdefault(name, {"group_name": name, "group_id": desc, "global_ranks": ranks})
        if g.get("global_ranks") is None and ranks is not None:
            g["global_ranks"] = ranks
        if g.get("group_id") is None and desc:
            g["group_id"] = desc

    def _memory(self, events: list[Event], idx: np.ndarray, first: int, file_idx: int, base_ns: int) -> None:
        evs = list(map(events.__getitem__, idx.tolist()))
        args = _decode_many(_MEMS_DEC, _MEM_DEC, field_values(evs, "args"))
        if None in args:
            args = [a if a is not None else _NO_MEM_ARGS for a in args]
        # device text per distinct (type, id) pair: there are only a few
        kinds = Codes()
        pair = list(map(kinds.__getitem__, map(_GET_DEVICE, args)))
        names = [_device_name(t, d) for t, d in kinds]
        t = pa.table(
            {
                "ts_ns": times_ns(field_values(evs, "ts"), base_ns),
                "tid": id_column(field_values(evs, "tid")),
                "device": pa.DictionaryArray.from_arrays(pa.array(pair, pa.int32()), pa.array(names, pa.string())).cast(
                    pa.string()
                ),
                "bytes": pa.array(list(map(_GET_BYTES, args)), pa.int64()),
                "allocated": pa.array(list(map(_GET_ALLOCATED, args)), pa.int64()),
                "reserved": pa.array(list(map(_GET_RESERVED, args)), pa.int64()),
                "addr": pa.array(list(map(_GET_ADDR, args)), pa.int64()),
                "event_id": pa.array(idx + first, pa.int64()),
                "_file": pa.repeat(pa.scalar(file_idx, pa.int32()), len(evs)),
            }
        )
        self.stage.write("memory", t)


def peek_rank(path: Path) -> tuple[int | None, int | None]:
    """(rank, world_size) from distributedInfo near the start of a trace, without parsing it."""
    try:
        with open_binary(path) as f:
            head = f.read(1 << 20)
    except (OSError, EOFError):
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
    router = EventRouter(ROUTE, picker, picker.write_slices)
    late_base: dict[int, int] = {}
    metas: list[dict[str, Any]] = []
    # the collector's window sidecar belongs to the collection (its status) but is not a trace
    traces = [p for p in plan.files if p.suffix in (".json", ".gz") and p.name != SIDECAR_NAME]
    for file_idx, path in enumerate(sorted(traces)):
        with ctx.reading(path, "kineto") as outcome:
            ts = TraceStream(path)
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
            for w in ts.warnings:
                outcome.warn(w)
            if ts.n_events == 0:
                raise InputError(str(path), "trace has no events")
            _check_rank(ctx, path, meta, outcome)
    staged = stage.close()
    if not staged and router.event_base == 0 and not ctx.writer.total_rows:
        return
    _finish(ctx, router, picker, staged, late_base, metas)


def _relative_times(events: list[Event]) -> bool:
    """True when ts values look relative (newer Kineto with a time base somewhere in the file)."""
    for e in events:
        if isinstance(e.ts, (int, float)) and e.ph in ("X", "i"):
            return e.ts < 1e14  # absolute epoch µs are ~1.6e15
    return False


def _check_rank(ctx: ReadContext, path: Path, meta: dict[str, Any], outcome: Any) -> None:
    dist = meta.get("distributedInfo")
    if (
        isinstance(dist, dict)
        and isinstance(dist.get("rank"), int)
        and dist["rank"] != ctx.rank
        and ctx.plan.rank_source in ("sidecar", "rank_dir")
    ):
        outcome.warn(f"distributedInfo.rank is {dist['rank']} but the folder says rank {ctx.rank}; kept {ctx.rank}")


class _Steps:
    """ProfilerStep ranges, to give each row the step its start falls in."""

    def __init__(self, step: np.ndarray, start: np.ndarray, end: np.ndarray):
        order = np.lexsort((step, start))
        self.step, self.start, self.end = step[order], start[order], end[order]

    def of(self, ts: pa.Array) -> pa.Array:
        """Step of each start time: the latest step starting at or before it, if it has not ended."""
        if len(self.start) == 0:
            return pa.nulls(len(ts), pa.int32())
        t = pc.fill_null(ts, 0).to_numpy(zero_copy_only=False)
        k = np.searchsorted(self.start, t, side="right") - 1
        kk = np.maximum(k, 0)
        ok = (k >= 0) & (t < self.end[kk])
        if ts.null_count:
            ok &= ts.is_valid().to_numpy(zero_copy_only=False)
        return pa.array(self.step[kk].astype(np.int32), type=pa.int32(), mask=~ok)


def _file_base(batch: pa.RecordBatch | pa.Table, late_base: dict[int, int]) -> np.ndarray | None:
    """Per-row time base (older Kineto writes baseTimeNanoseconds after the events), or None."""
    if not late_base or not any(late_base.values()) or batch.num_rows == 0:
        return None
    files = pc.fill_null(batch.column("_file"), 0).to_numpy(zero_copy_only=False)
    lut = np.zeros(max(max(late_base), int(files.max())) + 1, dtype=np.int64)
    for k, v in late_base.items():
        lut[k] = v
    return lut[files]


def _add_base(ts: pa.Array, base: np.ndarray | None) -> pa.Array:
    if base is None:
        return ts
    return pc.add(ts, pa.array(base, pa.int64()))


def _with(batch: pa.RecordBatch, table: str, replace: dict[str, pa.Array]) -> pa.Table:
    """The schema columns of ``table`` from a staged batch, some replaced."""
    names = schema.FACTS[table].column_names[3:]  # skip run/rank/collection_id (the writer sets them)
    return pa.table({c: replace[c] if c in replace else batch.column(c) for c in names})


def _finish(
    ctx: ReadContext,
    router: EventRouter,
    picker: KinetoPicker,
    staged: dict[str, Staged],
    late_base: dict[int, int],
    metas: list[dict[str, Any]],
) -> None:
    """Finish the staged rows: time base, steps, self time, memory pairing; written batch by batch."""
    if "slices" in staged:
        for b in staged["slices"].batches():
            ctx.write("slices", _with(b, "slices", {"ts_ns": _add_base(b.column("ts_ns"), _file_base(b, late_base))}))
    steps = _finish_steps(ctx, staged, late_base)
    ops_index = None
    if "operators" in staged:
        ops_index = _finish_operators(ctx, staged["operators"], late_base, steps)
    if "kernels" in staged:
        for b in staged["kernels"].batches():
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            ctx.write("kernels", _with(b, "kernels", {"ts_ns": ts, "step": steps.of(ts)}))
    if "comm_ops" in staged:
        # GPU traces: the NCCL kernels are the real communication time; CPU (gloo) traces: the
        # gloo:* / nccl:* ranges on the communication threads.
        default_group = _default_group(metas)
        for b in staged["comm_ops"].batches():
            if picker.comm_kernel_rows:
                b = b.filter(pc.equal(b.column("source"), "kineto:kernel"))
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            rep = {"ts_ns": ts, "step": steps.of(ts)}
            if default_group is not None:
                name, ranks = default_group
                rep["group_name"] = pc.coalesce(b.column("group_name"), pa.scalar(name, pa.string()))
                gr = b.column("group_ranks")
                rep["group_ranks"] = pc.if_else(pc.is_null(gr), pa.scalar(ranks, gr.type), gr)
            ctx.write("comm_ops", _with(b, "comm_ops", rep))
    if "memory" in staged:
        _finish_memory(ctx, staged["memory"], late_base, ops_index)
    if "counters" in staged:
        for b in staged["counters"].batches():
            ctx.write(
                "counters", _with(b, "counters", {"ts_ns": _add_base(b.column("ts_ns"), _file_base(b, late_base))})
            )
    if router.lane_counts:
        ctx.write("lanes", router.lane_rows(lambda pid, group: f"Device {pid}" if group == "device" else pid))
    _write_groups(ctx, picker, metas)
    _fill_meta(ctx, picker, metas)


def _finish_steps(ctx: ReadContext, staged: dict[str, Staged], late_base: dict[int, int]) -> _Steps:
    if "steps" not in staged:
        return _Steps(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    parts = []
    for b in staged["steps"].batches():
        base = _file_base(b, late_base)
        parts.append(
            pa.table(
                {
                    "step": b.column("step"),
                    "start_ns": _add_base(b.column("start_ns"), base),
                    "end_ns": _add_base(b.column("end_ns"), base),
                }
            )
        )
    t = pa.concat_tables(parts).group_by("step", use_threads=False).aggregate([("start_ns", "min"), ("end_ns", "max")])
    t = t.rename_columns(["step", "start_ns", "end_ns"]).sort_by("step")
    dur = pc.subtract(t.column("end_ns"), t.column("start_ns"))
    ctx.write(
        "steps",
        {
            "step": t.column("step"),
            "start_ns": t.column("start_ns"),
            "end_ns": t.column("end_ns"),
            "dur_ns": dur,
            "source": pa.repeat(pa.scalar("ProfilerStep"), t.num_rows),
        },
    )
    ok = pc.and_(pc.is_valid(t.column("start_ns")), pc.is_valid(t.column("end_ns")))
    t = t.filter(ok)
    return _Steps(*(t.column(c).to_numpy().astype(np.int64) for c in ("step", "start_ns", "end_ns")))


class _OpsIndex:
    """Host ops (file order): thread id, start and end, for naming memory blocks."""

    def __init__(self, rows: Staged, tid: pa.Array, ts: np.ndarray, dur: np.ndarray):
        self.rows, self.tid, self.ts, self.dur = rows, tid, ts, dur


def _finish_operators(ctx: ReadContext, rows: Staged, late_base: dict[int, int], steps: _Steps) -> _OpsIndex:
    """Self time and depth need every op of a thread in time order: sort positions with numpy
    (thread, start, longest first, file order), walk them, then stream the staged rows once."""
    keys = rows.columns(["_pid", "tid", "ts_ns", "dur_ns", "_file"])
    ts_arr = _add_base(keys.column("ts_ns").combine_chunks(), _file_base(keys, late_base))
    ts = pc.fill_null(ts_arr, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    dur = pc.fill_null(keys.column("dur_ns"), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    pid_code = _codes(keys.column("_pid"))
    tid_code = _codes(keys.column("tid"))
    thread = pid_code * (int(tid_code.max(initial=0)) + 2) + tid_code
    order = np.lexsort((-dur, ts, thread))  # stable: file order breaks the remaining ties
    depth_s, self_s = depth_and_self(thread[order], ts[order], dur[order])
    n = len(ts)
    depth = np.empty(n, dtype=np.int32)
    self_ns = np.empty(n, dtype=np.int64)
    depth[order] = depth_s
    self_ns[order] = self_s
    step = steps.of(ts_arr)
    r0 = 0
    for b in rows.batches():
        r1 = r0 + b.num_rows
        ctx.write(
            "operators",
            _with(
                b,
                "operators",
                {
                    "ts_ns": ts_arr.slice(r0, b.num_rows),
                    "step": step.slice(r0, b.num_rows),
                    "self_ns": pa.array(self_ns[r0:r1]),
                    "depth": pa.array(depth[r0:r1]),
                },
            ),
        )
        r0 = r1
    return _OpsIndex(rows, keys.column("tid").combine_chunks(), ts, dur)


def _codes(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer code per distinct value (null = -1... shifted to 0); equal values, equal codes."""
    enc = pc.dictionary_encode(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr)
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def _finish_memory(ctx: ReadContext, rows: Staged, late_base: dict[int, int], ops: _OpsIndex | None) -> None:
    m = pa.Table.from_batches(list(rows.batches()))
    b = m.combine_chunks().to_batches()[0] if m.num_rows else None
    if b is None:
        return
    t_arr = _add_base(b.column("ts_ns"), _file_base(b, late_base))
    order = pa.array(np.argsort(pc.fill_null(t_arr, 0).to_numpy(zero_copy_only=False), kind="stable"))
    allocated = b.column("allocated").take(order)
    if allocated.null_count == len(allocated) and b.column("bytes").null_count < b.num_rows:
        allocated = _allocated_from_deltas(b.column("bytes").take(order), b.column("device").take(order))
        ctx.meta.missing.append(
            "memory totals rebuilt from the allocation sizes (old trace without Total Allocated): a lower "
            "bound, blocks allocated before the trace began are not counted"
        )
    ctx.write(
        "memory_samples",
        {
            "ts_ns": t_arr.take(order),
            "component": pa.repeat(pa.scalar("allocator"), b.num_rows),
            "device": b.column("device").take(order),
            "allocated_bytes": allocated,
            "reserved_bytes": b.column("reserved").take(order),
            "source": pa.repeat(pa.scalar("kineto"), b.num_rows),
        },
    )
    _finish_operator_memory(ctx, b, t_arr, ops)


def _allocated_from_deltas(nbytes: pa.Array, device: pa.Array) -> pa.Array:
    """Allocated bytes per device as the running sum of the samples' signed sizes (time order),
    shifted so that it never goes below 0: the least the allocator can have held."""
    delta = pc.fill_null(nbytes, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    dev = _codes(device)
    out = np.zeros(len(delta), dtype=np.int64)
    for d in np.unique(dev):
        m = dev == d
        run = np.cumsum(delta[m])
        out[m] = run - min(0, int(run.min()))
    return pa.array(out, pa.int64())


def _finish_operator_memory(ctx: ReadContext, b: pa.RecordBatch, t_arr: pa.Array, ops: _OpsIndex | None) -> None:
    """Pair each allocation with the next event of the same address (a free); name the block after
    the operator that started last on the allocating thread, if it still runs then."""
    keep = np.flatnonzero(
        pc.and_(pc.is_valid(b.column("addr")), pc.and_(pc.is_valid(b.column("bytes")), pc.is_valid(t_arr))).to_numpy(
            zero_copy_only=False
        )
    )
    if not len(keep):
        return
    t = t_arr.to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    nbytes = b.column("bytes").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    addr = b.column("addr").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    dev = _codes(b.column("device"))[keep]
    eid = b.column("event_id").to_numpy(zero_copy_only=False)[keep]
    o = np.lexsort((eid, t, addr, dev))  # per (device, address) in time order
    nxt = np.full(len(o), -1, dtype=np.int64)
    same = (dev[o][1:] == dev[o][:-1]) & (addr[o][1:] == addr[o][:-1])
    nxt[o[:-1][same]] = o[1:][same]
    allocs = np.flatnonzero(nbytes > 0)
    allocs = allocs[np.argsort(t[allocs], kind="stable")]  # ORDER BY alloc time
    rel = nxt[allocs]
    is_rel = rel >= 0
    is_rel[is_rel] = nbytes[rel[is_rel]] < 0
    rel_rows = np.where(is_rel, keep[np.maximum(rel, 0)], -1)
    rel_take = pa.array(rel_rows, mask=~is_rel)
    alloc_rows = pa.array(keep[allocs])
    t_alloc = t[allocs]
    t_rel = np.where(is_rel, t[np.maximum(rel, 0)], 0)
    names = pa.nulls(len(allocs), pa.string())
    if ops is not None and len(ops.ts):
        names = _op_names_at(ops, b.column("tid").take(alloc_rows), t_alloc)
    ctx.write(
        "operator_memory",
        {
            "name": names,
            "size_bytes": pa.array(nbytes[allocs]),
            "alloc_ns": pa.array(t_alloc),
            "release_ns": pa.array(t_rel, mask=~is_rel),
            "duration_ns": pa.array(t_rel - t_alloc, mask=~is_rel),
            "alloc_allocated_bytes": b.column("allocated").take(alloc_rows),
            "alloc_reserved_bytes": b.column("reserved").take(alloc_rows),
            "release_allocated_bytes": b.column("allocated").take(rel_take),
            "release_reserved_bytes": b.column("reserved").take(rel_take),
            "device": b.column("device").take(alloc_rows),
        },
    )


def _op_names_at(ops: _OpsIndex, tid: pa.Array, t: np.ndarray) -> pa.Array:
    """Name of the op that started last at or before ``t`` on the same thread (ties: the innermost),
    if it still runs at ``t``; null otherwise."""
    n_ops = len(ops.ts)
    codes = pc.dictionary_encode(pa.concat_arrays([ops.tid.cast(pa.string()), tid.cast(pa.string())])).indices
    codes = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    op_code, mem_code = codes[:n_ops], codes[n_ops:]
    by = np.lexsort((-ops.dur, ops.ts, op_code))
    code_s, ts_s = op_code[by], ops.ts[by]
    end_s = ts_s + ops.dur[by]
    match = np.full(len(t), -1, dtype=np.int64)
    for c in np.unique(mem_code).tolist():
        if c < 0:
            continue
        lo, hi = np.searchsorted(code_s, c, "left"), np.searchsorted(code_s, c, "right")
        if lo == hi:
            continue
        rows = np.flatnonzero(mem_code == c)
        pos = lo + np.searchsorted(ts_s[lo:hi], t[rows], side="right") - 1
        ok = pos >= lo
        pos, rows = pos[ok], rows[ok]
        running = end_s[pos] >= t[rows]
        match[rows[running]] = by[pos[running]]
    if not (match >= 0).any():
        return pa.nulls(len(t), pa.string())
    names = ops.rows.columns(["name"]).column("name")
    return names.take(pa.array(match, mask=match < 0)).combine_chunks()


def _default_group(metas: list[dict[str, Any]]) -> tuple[str, list[int]] | None:
    """The only process group of a job (gloo annotations carry no group): (name, ranks)."""
    for meta in metas:
        dist = meta.get("distributedInfo")
        if isinstance(dist, dict):
            pgs = dist.get("pg_config")
            if isinstance(pgs, list) and len(pgs) == 1 and isinstance(pgs[0], dict):
                ranks = pgs[0].get("ranks")
                if isinstance(ranks, list):
                    return str(pgs[0].get("pg_name", "0")), [int(r) for r in ranks]
            ws = dist.get("world_size")
            if isinstance(ws, int) and pgs is None:
                return "0", list(range(ws))
    return None


def _write_groups(ctx: ReadContext, picker: KinetoPicker, metas: list[dict[str, Any]]) -> None:
    groups = dict(picker.groups)
    backend = None
    for meta in metas:
        dist = meta.get("distributedInfo")
        if not isinstance(dist, dict):
            continue
        backend = backend or dist.get("backend")
        for pg in dist.get("pg_config") or []:
            if not isinstance(pg, dict):
                continue
            name = str(pg.get("pg_name", ""))
            g = groups.setdefault(name, {"group_name": name})
            g.setdefault("group_id", pg.get("pg_desc"))
            if g.get("group_id") is None:
                g["group_id"] = pg.get("pg_desc")
            if g.get("global_ranks") is None and isinstance(pg.get("ranks"), list):
                g["global_ranks"] = [int(r) for r in pg["ranks"]]
            g["backend"] = pg.get("backend_config") or backend
    if not groups:
        return
    rows = []
    for g in groups.values():
        ranks = g.get("global_ranks")
        desc = g.get("group_id")
        rows.append(
            {
                "group_name": g["group_name"],
                "group_id": desc,
                "pg_name": desc,
                "global_ranks": ranks,
                "local_rank": ranks.index(ctx.rank) if ranks and ctx.rank in ranks else None,
                "backend": g.get("backend") or backend,
                "source": "distributedInfo.pg_config" if g.get("backend") else "record_param_comms",
            }
        )
    ctx.write("comm_groups", pa.Table.from_pylist(rows))


def _fill_meta(ctx: ReadContext, router: KinetoPicker, metas: list[dict[str, Any]]) -> None:
    m = ctx.meta
    dist = next((x.get("distributedInfo") for x in metas if isinstance(x.get("distributedInfo"), dict)), None)
    if dist and isinstance(dist.get("world_size"), int):
        m.world_size = dist["world_size"]
    host = next((x.get("host_name") for x in metas if x.get("host_name")), None)
    m.hostname = host
    schema_v = next((x.get("schemaVersion") for x in metas if x.get("schemaVersion") is not None), None)
    m.producer_version = f"kineto schema {schema_v}" if schema_v is not None else None
    flags = {
        k: metas[0].get(k)
        for k in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
        if metas and k in metas[0]
    }
    m.config = flags or None
    m.extra = {
        "distributedInfo": dist,
        "deviceProperties": next((x.get("deviceProperties") for x in metas if x.get("deviceProperties")), None),
        "trace_id": next((x.get("trace_id") for x in metas if x.get("trace_id")), None),
    }
    w = ctx.writer
    caps = m.capabilities
    ctx.add_table_capabilities()
    if router.has_stacks:
        caps.add("stacks")
    if router.has_shapes:
        caps.add("shapes")
    if not w.has("kernels"):
        m.missing.append("no device kernels: CPU-only trace (torch.profiler without a CUDA activity)")
    if not w.has("memory_samples"):
        m.missing.append("no memory events: profile_memory was off")
    if not router.has_stacks:
        m.missing.append("no call stacks: with_stack was off")
    if not router.has_shapes:
        m.missing.append("no input shapes: record_shapes was off")
    if not w.has("steps"):
        m.missing.append("no ProfilerStep ranges: the profiler was used without prof.step()")
    if not w.has("comm_ops"):
        m.missing.append("no communication: single process or no collective in the window")
    m.missing.append("no communication matrix: Kineto does not record per-link transfers")
