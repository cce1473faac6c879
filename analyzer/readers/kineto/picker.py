"""Kineto's rows of each block the event router hands over (``KinetoPicker``): operators, ProfilerStep
ranges, kernels, collectives and their process groups, ``[memory]`` events and counters, staged for the
end of the files (``common.spill``) because their time base, steps and self time are known only then."""

from __future__ import annotations

import re
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...factwriter import conform
from ...vocabulary import P2P_TYPES, is_comm_annotation, normalize_op_type
from ..base import ReadContext
from ..chrome.columns import (
    Codes,
    EventColumns,
    decode_args,
    field_values,
    id_column,
    id_text,
    raw_text_array,
    times_ns,
)
from ..chrome.lanes import LaneRules
from ..chrome.router import EventRouter, RoutedBlock, RouteRules, where
from ..chrome.stream import ANY, NO_RAW, Event
from ..common.jsonfile import DECODE_ERRORS, decode_or_none
from ..common.spill import SpillStage

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


ROUTE = RouteRules(LANES, op_categories=frozenset(OP_CATS), held_instants=frozenset({"[memory]"}))


class OpArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    seq: int | None = msgspec.field(default=None, name="Sequence number")
    concrete: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")


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
    correlation: int | None = None  # a kernel's: the id of its launch call (cudaLaunchKernel...)


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


# point-to-point calls and the position of the peer among their inputs: c10d::send(tensors,
# process group, dst, tag), c10d::recv_(tensors, process group, src, tag)
P2P_CALLS = {"c10d::send": 2, "c10d::recv_": 2}


def _peers(names: pa.Array, present: list[OpArgs]) -> pa.Array:
    """Per op, the peer a point-to-point call names in its ``Concrete Inputs`` (torch records them
    with record_shapes: the rank in the call's process group), else null."""
    out: list[int | None] = [None] * len(present)
    hit = pc.is_in(names, value_set=pa.array(sorted(P2P_CALLS), pa.string()))
    for i in np.flatnonzero(pc.fill_null(hit, False).to_numpy(zero_copy_only=False)).tolist():
        raw = present[i].concrete
        try:
            got = msgspec.json.decode(raw) if raw else None
            out[i] = int(got[P2P_CALLS[names[i].as_py()]])
        except (msgspec.DecodeError, TypeError, ValueError, IndexError, KeyError):
            continue
    return pa.array(out, pa.int32())


_GET_KDEV = attrgetter("device")


_GET_KSTR = attrgetter("stream")


_KERNEL_CATS = pa.array(sorted(KERNEL_CATS), pa.string())


def _int_ids(values: list[int | str | None]) -> pa.Array:
    """pid / tid values that are integers (a string id is null here)."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([v if isinstance(v, int) and not isinstance(v, bool) else None for v in values], pa.int64())


# host calls that launch device work (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, hipLaunchKernel, ...)
_RUNTIME_CATS = pa.array(["cuda_runtime", "cuda_driver", "Runtime"], pa.string())
_CORRELATION = r'"correlation":\s*(?P<c>\d+)'


def _device_name(device_type: int | None, device_id: int | None) -> str:
    kind = _DEVICE_TYPES.get(device_type if device_type is not None else -1, str(device_type))
    return kind if kind == "CPU" or device_id is None or device_id < 0 else f"{kind}:{device_id}"


_DEVICE_TYPES = {0: "CPU", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 20: "privateuse1"}


def _parse_ranks(v: str | list[int] | None) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, list):
        return [int(x) for x in v]
    try:
        out = ANY.decode(v.encode())
        return [int(x) for x in out] if isinstance(out, list) else None
    except (*DECODE_ERRORS, ValueError, TypeError):
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


def staged_table(ctx: ReadContext, table: str, cols: dict[str, Any], file_idx: int) -> pa.Table:
    notes: list[str] = []
    t = conform(table, cols, _STAGE_KEY, notes)
    for note in notes:  # values that do not fit their column: named on the file being read
        ctx.note(note)
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
        self.files: list[Path] = []  # the trace files, in the order file_idx counts them

    def write_slices(self, sl: dict[str, pa.Array]) -> None:
        if self.direct_slices:
            self.ctx.write("slices", sl)
        else:
            self.stage.write("slices", staged_table(self.ctx, "slices", sl, self.file_idx))

    def block(self, router: EventRouter, b: RoutedBlock) -> None:
        """Every table takes its rows from the router's columns through masks — no per-event Python
        loop except over the rare kinds (step markers, annotations, kernels, memory events)."""
        events, base_ns, file_idx = b.events, b.base_ns, self.file_idx
        comm_idx = np.zeros(0, dtype=np.int64)
        steps: list[tuple[int, int]] = []
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
            kmask = pc.and_(b.x_sl, pc.is_in(cat, value_set=_KERNEL_CATS))
            if pc.any(kmask).as_py():
                self._kernels(b, kmask, file_idx)
            self._launches(cols, b.x_sl, file_idx)
        if steps:
            self._steps(events, steps, file_idx, base_ns)
        if len(comm_idx):
            self._annotation_comms(events, comm_idx.tolist(), file_idx, base_ns)
        if len(b.held_idx):
            self._memory(b, file_idx)

    def counters(self, cols: dict[str, pa.Array]) -> None:
        cols["process"] = cols.pop("pid")
        self.stage.write("counters", staged_table(self.ctx, "counters", cols, self.file_idx))

    # -- per kind --------------------------------------------------------------------------------

    def _ops(self, events: list[Event], idx: np.ndarray, cols: EventColumns, mask: pa.Array, file_idx: int) -> None:
        args = decode_args(cols.args.filter(mask), _OP_DEC)
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
            "peer": _peers(cols.name.filter(mask), present),
        }
        t = staged_table(self.ctx, "operators", ops, file_idx)
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
        self.stage.write("steps", staged_table(self.ctx, "steps", cols, file_idx))

    def _kernels(self, b: RoutedBlock, kmask: pa.Array, file_idx: int) -> None:
        """Device kernels of the block (the slices where ``kmask`` is true): device and stream from
        their args (a collective's from its ``CommArgs``), else from an integer pid / tid."""
        cols = b.cols
        assert cols is not None
        pos = b.sl_idx[where(kmask)]
        name = cols.name.filter(kmask)
        args = cols.args.filter(kmask)
        comm = pc.fill_null(pc.match_substring_regex(pc.utf8_lower(name), "nccl|rccl|hccl"), False)
        kargs = decode_args(args, _KERNEL_DEC)
        device = [a.device if a is not None else None for a in kargs] if None in kargs else list(map(_GET_KDEV, kargs))
        stream = [a.stream if a is not None else None for a in kargs] if None in kargs else list(map(_GET_KSTR, kargs))
        comm_pos = where(comm)
        comm_rows: list[int] = []
        comm_args: list[CommArgs] = []
        if len(comm_pos):  # collectives (a few per step): their CommArgs, one by one
            for j, a in zip(comm_pos.tolist(), decode_args(args.take(pa.array(comm_pos)), _COMM_DEC)):
                if a is not None:
                    comm_rows.append(j)
                    comm_args.append(a)
                    device[j], stream[j] = a.device, a.stream
        evs = list(map(b.events.__getitem__, pos.tolist()))
        cols_out = {
            "kernel_id": pa.array(pos + b.first, pa.int64()),
            "name": name,
            "core_type": cols.cat.filter(kmask),
            "is_communication": comm,
            "device_id": pc.coalesce(pa.array(device, pa.int64()), _int_ids(field_values(evs, "pid"))),
            "stream_id": pc.coalesce(pa.array(stream, pa.int64()), _int_ids(field_values(evs, "tid"))),
            "ts_ns": cols.ts_ns.filter(kmask),
            "dur_ns": cols.dur_ns.filter(kmask),
        }
        self.stage.write("kernels", staged_table(self.ctx, "kernels", cols_out, file_idx))
        if comm_rows:
            self.comm_kernel_rows += len(comm_rows)
            sub = [evs[j] for j in comm_rows]
            self._comm_rows(sub, comm_args, file_idx, b.base_ns, "kineto:kernel")

    def _launches(self, cols: EventColumns, x_sl: pa.Array, file_idx: int) -> None:
        """Kernel launch calls (thread, time, correlation id): a collective's kernel is named by its
        implementation (``ncclKernel_SendRecv`` runs all_to_all, send and recv alike); the
        ``nccl:*`` range its launch ran in names the operation (``finish.type_kernels_by_launch``)."""
        mask = pc.and_(
            pc.and_(x_sl, pc.is_in(cols.cat, value_set=_RUNTIME_CATS)),
            pc.fill_null(pc.match_substring(cols.name, "Launch"), False),
        )
        if not pc.any(mask).as_py():
            return
        corr = pc.struct_field(pc.extract_regex(cols.args.filter(mask), _CORRELATION), "c")
        t = pa.table(
            {
                "tid": cols.tid.filter(mask),
                "ts_ns": cols.ts_ns.filter(mask),
                "corr": pc.cast(corr, pa.int64()),
                "_file": pa.repeat(pa.scalar(file_idx, pa.int32()), pc.sum(pc.cast(mask, pa.int64())).as_py()),
            }
        )
        self.stage.write("launches", t.filter(pc.is_valid(t.column("corr"))))

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
        t = staged_table(self.ctx, "comm_ops", cols, file_idx)
        t = t.append_column("_tid", pa.array([id_text(e.tid) for e in evs], pa.string()))
        t = t.append_column("_corr", pa.array([a.correlation if a is not None else None for a in args], pa.int64()))
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

    def _memory(self, b: RoutedBlock, file_idx: int) -> None:
        evs = list(map(b.events.__getitem__, b.held_idx.tolist()))
        args = decode_args(raw_text_array(field_values(evs, "args")), _MEM_DEC)
        if None in args:
            args = [a if a is not None else _NO_MEM_ARGS for a in args]
        # device text per distinct (type, id) pair: there are only a few
        kinds = Codes()
        pair = list(map(kinds.__getitem__, map(_GET_DEVICE, args)))
        names = [_device_name(t, d) for t, d in kinds]
        t = pa.table(
            {
                "ts_ns": times_ns(field_values(evs, "ts"), b.base_ns),
                "tid": id_column(field_values(evs, "tid")),
                "device": pa.DictionaryArray.from_arrays(pa.array(pair, pa.int32()), pa.array(names, pa.string())).cast(
                    pa.string()
                ),
                "bytes": pa.array(list(map(_GET_BYTES, args)), pa.int64()),
                "allocated": pa.array(list(map(_GET_ALLOCATED, args)), pa.int64()),
                "reserved": pa.array(list(map(_GET_RESERVED, args)), pa.int64()),
                "addr": pa.array(list(map(_GET_ADDR, args)), pa.int64()),
                "event_id": pa.array(b.held_idx + b.first, pa.int64()),
                "_file": pa.repeat(pa.scalar(file_idx, pa.int32()), len(args)),
            }
        )
        self.stage.write("memory", t)
