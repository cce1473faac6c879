"""The CANN family's Chrome traces: torch_npu / MindSpore ``trace_view.json`` and msprof's json
timelines (``msprof_*.json``, the legacy per-device ``device_{d}/timeline/msprof_*.json``);
docs/formats.md §1.5, §3.3, §3.6.

They are bare arrays of Chrome events, routed by the one event router (``chrome.router``) with the
Ascend lane rules: lanes are grouped by process name (Python / CANN / MindSpore -> host, Ascend
Hardware / NPU -> device, HCCL -> communication, Overlap Analysis). ``AscendPicker`` takes the
family's rows from each block:

- operators: ``cpu_op`` events, and for MindSpore the X events of its framework processes
  (``op_processes``: an event's process is known from the M events *before* it, in file order);
  ``ProfilerStep#N`` ranges among them;
- the big HCCL ops (``hcom_*`` on the ``Group N Communication`` lanes: dtype, count, algorithm);
- CANN API events by level (``AscendCL@``, ``Runtime@``, ...);
- device tasks of the Ascend Hardware lanes (``DeviceTasks``: the ``kernels`` when no CSV gives them;
  in a trace_view.json decided at the event's position, in a timeline after its block's M events);
- with ``timeline=True`` (msprof): ``Iteration N`` ranges, and the communication ops of the
  ``Group N Communication`` lanes.

Timestamps are exact µs strings (torch_npu) or numbers (msprof), parsed to integer ns.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import problem
from ...vocabulary import COMM_OP_PREFIX, COMM_TASK_TYPES, P2P_TYPES, normalize_op_type
from ..base import FileOutcome, ReadContext
from ..chrome.columns import Codes, EventColumns, decode_args, id_text
from ..chrome.lanes import LaneRules, lane_group
from ..chrome.router import EventRouter, RoutedBlock, RouteRules
from ..chrome.stream import TraceStream
from ..common.cells import task_ids
from ..common.jsonfile import decode_or_none
from ..common.spill import SpillStage, Staged
from ..common.steps import steps_containing
from .communication import hccl_bytes

# Ascend lanes are grouped by process name
LANES = LaneRules(
    default="other",
    processes={
        "Python": "host",
        "CANN": "host",
        "MindSpore": "host",
        "CPU OP": "host",
        "Scope Layer": "host",
        "Ascend Hardware": "device",
        "HCCL": "communication",
        "Communication": "communication",
        "Overlap Analysis": "overlap",
    },
    prefixes=(("Python", "host"), ("CANN", "host"), ("GC", "host"), ("NPU", "device"), ("HCCL", "communication")),
)
ROUTE = RouteRules(LANES, ordered_lanes=True)
CANN_LEVELS = ("AscendCL@", "Runtime@", "Node@", "Hccl@", "Model@")  # CANN API event name prefixes
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_ITER_RE = re.compile(r"^Iteration (\d+)$")
_COMM_LANE_RE = re.compile(r"^Group (?P<g>.+?) Communication$")


class NpuOpArgs(msgspec.Struct, gc=False):
    input_dims: str | list[Any] | None = msgspec.field(default=None, name="Input Dims")
    input_type: str | list[Any] | None = msgspec.field(default=None, name="Input type")
    call_stack: str | None = msgspec.field(default=None, name="Call stack")
    seq: int | None = msgspec.field(default=None, name="Sequence number")


class HcclArgs(msgspec.Struct, gc=False):
    data_type: str | None = None
    count: int | float | None = None
    alg_type: str | None = None


class TaskArgs(msgspec.Struct, gc=False):
    task_type: str | None = msgspec.field(default=None, name="Task Type")
    stream: int | str | None = msgspec.field(default=None, name="Stream Id")
    physic_stream: int | str | None = msgspec.field(default=None, name="Physic Stream Id")
    task: int | str | None = msgspec.field(default=None, name="Task Id")
    model: int | str | None = msgspec.field(default=None, name="Model Id")


_OP_DEC = msgspec.json.Decoder(NpuOpArgs)
_HCCL_DEC = msgspec.json.Decoder(HcclArgs)
_TASK_DEC = msgspec.json.Decoder(TaskArgs)
_NO_OP_ARGS = NpuOpArgs()
_NO_TASK = TaskArgs()
_GET_DIMS = attrgetter("input_dims")
_GET_TYPES = attrgetter("input_type")
_GET_STACK = attrgetter("call_stack")
_GET_SEQ = attrgetter("seq")
_GET_TASK_TYPE = attrgetter("task_type")
_GET_STREAM = attrgetter("stream")
_GET_PHYSIC_STREAM = attrgetter("physic_stream")
_GET_TASK = attrgetter("task")
_COMM_TASK_TYPES = pa.array(sorted(COMM_TASK_TYPES), pa.string())


def is_device_lane(process: str, lane: str) -> bool:
    """A device stream lane, where the tasks are (not msprof's Step Trace lane)."""
    return lane_group(LANES, process) == "device" and not lane.startswith("Step Trace")


@functools.lru_cache(maxsize=1 << 16)
def stack_text(s: str | None) -> str | None:
    """'a.py(1): f;\\r\\nb.py(2): g' -> 'a.py(1): f\\nb.py(2): g' (stacks repeat: cached)."""
    if not s:
        return None
    frames = [f.strip().rstrip(";").strip() for f in s.replace("\r", "\n").split("\n")]
    return "\n".join(f for f in frames if f) or None


def has_shape(s: str | None) -> bool:
    return bool(s) and bool(re.search(r"\d", s or ""))


def _as_text(v: str | list[Any] | None) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v if v.strip() else None
    return msgspec.json.encode(v).decode()


class DeviceTasks:
    """Device tasks picked from the Ascend Hardware lanes of a chrome-trace array (the ``kernels``
    table when no CSV gives them: msprof's json timeline, a trace_view.json without kernel_details.csv)."""

    def __init__(self) -> None:
        self.parts: list[pa.Table] = []
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def pick(self, cols: EventColumns, mask: pa.Array) -> None:
        """The tasks among the routed slices ``cols`` where ``mask`` is true."""
        name = cols.name.filter(mask)
        if not len(name):
            return
        args = decode_args(cols.args.filter(mask), _TASK_DEC)
        present = [a if a is not None else _NO_TASK for a in args] if None in args else args
        task_type = pa.array(list(map(_GET_TASK_TYPE, present)), pa.string())
        stream = task_ids(list(map(_GET_STREAM, present)))
        stream = pc.coalesce(stream, task_ids(list(map(_GET_PHYSIC_STREAM, present))))
        stream = pc.coalesce(stream, task_ids(cols.tid.filter(mask).to_pylist()))
        comm = pc.or_(
            pc.fill_null(pc.is_in(pc.utf8_upper(task_type), value_set=_COMM_TASK_TYPES), False),
            pc.fill_null(pc.starts_with(name, COMM_OP_PREFIX), False),
        )
        self.parts.append(
            pa.table(
                {
                    "name": name,
                    "core_type": task_type,
                    "is_communication": comm,
                    "stream_id": stream,
                    "task_id": task_ids(list(map(_GET_TASK, present))),
                    "ts_ns": cols.ts_ns.filter(mask),
                    "dur_ns": cols.dur_ns.filter(mask),
                }
            )
        )
        self.n += len(name)

    def columns(self, first_kernel_id: int, step_of: Callable[[pa.ChunkedArray], list[int | None]]) -> pa.Table:
        t = pa.concat_tables(self.parts) if self.parts else _EMPTY_TASKS
        ids = pa.array(np.arange(first_kernel_id, first_kernel_id + t.num_rows, dtype=np.int64))
        return t.append_column("kernel_id", ids).append_column("step", pa.array(step_of(t.column("ts_ns")), pa.int64()))


_EMPTY_TASKS = pa.table(
    {
        "name": pa.array([], pa.string()),
        "core_type": pa.array([], pa.string()),
        "is_communication": pa.array([], pa.bool_()),
        "stream_id": pa.array([], pa.int64()),
        "task_id": pa.array([], pa.int64()),
        "ts_ns": pa.array([], pa.int64()),
        "dur_ns": pa.array([], pa.int64()),
    }
)


Collectives = tuple[str, Callable[[str], "str | None"]]  # (process, op name -> collective type or None)


class _Lanes:
    """The lanes of a block's slices: a code per slice, and the (pid, tid) of each code."""

    def __init__(self, cols: EventColumns):
        pid = pc.dictionary_encode(cols.pid)
        tid = pc.dictionary_encode(cols.tid)
        pids = [""] + [p or "" for p in pid.dictionary.to_pylist()]
        tids = [""] + [t or "" for t in tid.dictionary.to_pylist()]
        pi = pc.fill_null(pid.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        ti = pc.fill_null(tid.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        uniq, self.code = np.unique(pi * len(tids) + ti, return_inverse=True)
        self.keys = [(pids[u // len(tids)], tids[u % len(tids)]) for u in uniq.tolist()]

    def flag(self, rule: Callable[[str, str], bool], lo: int = 0, hi: int | None = None) -> np.ndarray:
        """``rule(pid, tid)`` of the lane of each slice in ``[lo, hi)`` (the rule sees the lane names
        known now)."""
        per_lane = np.fromiter((rule(p, t) for p, t in self.keys), dtype=bool, count=len(self.keys))
        return per_lane[self.code[lo:hi]]


class AscendPicker:
    """The Ascend family's rows of each routed block (see the module doc). Decisions that depend on
    a lane's name use the names known at the event's position: the block is cut at its M events and
    each piece is decided at once (M events come in a few runs: a few pieces per file)."""

    def __init__(
        self,
        stage: SpillStage,
        op_processes: frozenset[str] = frozenset(),
        device_tasks: bool = False,
        timeline: bool = False,
        collectives: Collectives | None = None,
    ):
        self.stage = stage
        # processes whose X events are framework ops even without the cpu_op category (MindSpore:
        # "MindSpore", "CPU OP"); an event's process is known because M events precede its X events
        self.op_processes = op_processes
        # (process, rule): X events of that process whose name the rule gives a collective type
        # (MindSpore on CPU runs its collectives as host ops): name, op_type, ts_ns, dur_ns
        self.collective_rule = collectives
        self.collectives: list[pa.Table] = []
        self.has_stacks = False
        self.has_shapes = False
        self.steps: list[tuple[int, int, int]] = []  # ProfilerStep ranges: (step, start, end)
        self.hccl: list[dict[str, Any]] = []  # candidate big communication ops
        self.cann_levels: Counter[str] = Counter()
        self.device_tasks: DeviceTasks | None = DeviceTasks() if device_tasks else None
        self.timeline = timeline  # msprof: iterations and the communication lanes' ops
        self.iterations: dict[int, list[int]] = {}
        self.comms: list[dict[str, Any]] = []

    def block(self, router: EventRouter, b: RoutedBlock) -> None:
        cols = b.cols
        if cols is None:
            for i in b.m_idx.tolist():
                router.lanes.add(b.events[i])
            return
        n = len(cols.name)
        is_x = b.x_sl.to_numpy(zero_copy_only=False)
        no_cat = cols.cat.is_null().to_numpy(zero_copy_only=False)
        proc_op = np.zeros(n, dtype=bool)  # an X event of a framework process (op_processes)
        tasks = np.zeros(n, dtype=bool)  # on a device lane
        coll = np.zeros(n, dtype=bool)  # of the collectives' process
        lanes = None
        by_process = bool(self.op_processes) or self.collective_rule is not None
        by_lane = self.device_tasks is not None and not self.timeline
        if by_process or by_lane:
            lanes = _Lanes(cols)
            # slices between two runs of M events see the same names: decide them together
            cut = np.searchsorted(b.sl_idx, b.m_idx)
            lo = 0
            for k, m in enumerate(b.m_idx.tolist()):
                hi = int(cut[k])
                if hi > lo:
                    self._decide(router, lanes, lo, hi, proc_op, tasks, coll)
                    lo = hi
                router.lanes.add(b.events[m])
            if n > lo:
                self._decide(router, lanes, lo, n, proc_op, tasks, coll)
        else:
            for i in b.m_idx.tolist():
                router.lanes.add(b.events[i])
        is_op = pc.fill_null(pc.equal(cols.cat, "cpu_op"), False).to_numpy(zero_copy_only=False) | (proc_op & is_x)
        rest = ~is_op & no_cat
        hcom = rest & is_x & pc.fill_null(pc.starts_with(cols.name, "hcom_"), False).to_numpy(zero_copy_only=False)
        if hcom.any():
            self._hccl(b, hcom)
        self._count_cann(cols.name, rest & ~hcom)
        if by_lane:
            tasks &= is_x & no_cat
            if tasks.any():
                self.device_tasks.pick(cols, pa.array(tasks))  # type: ignore[union-attr]
        if is_op.any():
            self._ops(router, cols, pa.array(is_op))
        if (coll & is_x).any():
            self._collectives(cols, pa.array(coll & is_x))
        if self.timeline:  # after the block's M events, so every lane of the block is named
            bare = no_cat | pc.fill_null(pc.equal(cols.cat, ""), False).to_numpy(zero_copy_only=False)
            self._timeline(router, b, is_x & bare)

    def _decide(
        self,
        router: EventRouter,
        lanes: _Lanes,
        lo: int,
        hi: int,
        proc_op: np.ndarray,
        tasks: np.ndarray,
        coll: np.ndarray,
    ) -> None:
        """Which of the slices ``[lo, hi)`` are of a framework process, on a device lane, of the
        collectives' process (by the lane names known now)."""
        if self.op_processes:
            proc_op[lo:hi] = lanes.flag(lambda p, t: router.process(p) in self.op_processes, lo, hi)
        if self.device_tasks is not None and not self.timeline:
            tasks[lo:hi] = lanes.flag(lambda p, t: is_device_lane(router.process(p), router.lane(p, t)), lo, hi)
        if self.collective_rule is not None:
            process = self.collective_rule[0]
            coll[lo:hi] = lanes.flag(lambda p, t: router.process(p) == process, lo, hi)

    def _collectives(self, cols: EventColumns, mask: pa.Array) -> None:
        """The collectives among the X events of the collectives' process (by name; names repeat)."""
        assert self.collective_rule is not None
        names = cols.name.filter(mask)
        codes = Codes()
        idx = np.fromiter(map(codes.__getitem__, names.to_pylist()), dtype=np.int32, count=len(names))
        kinds = pa.array([self.collective_rule[1](nm or "") for nm in codes], pa.string()).take(pa.array(idx))
        keep = kinds.is_valid()
        if not pc.any(keep).as_py():
            return
        self.collectives.append(
            pa.table(
                {
                    "name": names.filter(keep),
                    "op_type": kinds.filter(keep),
                    "ts_ns": cols.ts_ns.filter(mask).filter(keep),
                    "dur_ns": cols.dur_ns.filter(mask).filter(keep),
                }
            )
        )

    def _count_cann(self, names: pa.Array, mask: np.ndarray) -> None:
        """CANN API events by level (``AscendCL@...``), counted in order of first appearance."""
        if not mask.any():
            return
        picked = names.filter(pa.array(mask))
        seen = []
        for level in CANN_LEVELS:
            hits = pc.fill_null(pc.starts_with(picked, level), False)
            k = pc.sum(hits).as_py() or 0
            if k:
                seen.append((pc.index(hits, True).as_py(), level[:-1], k))
        for _, level, k in sorted(seen):
            self.cann_levels[level] += k

    def _hccl(self, b: RoutedBlock, mask: np.ndarray) -> None:
        """The hcom_* events (a few per step): kept with their raw times, matched later."""
        for j in np.flatnonzero(mask).tolist():
            e = b.events[int(b.sl_idx[j])]
            a = decode_or_none(_HCCL_DEC, e.args)
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

    def counters(self, cols: dict[str, pa.Array]) -> None:
        cols["_pid"] = cols.pop("pid")
        self.stage.write("counters", pa.table(cols))

    def _ops(self, router: EventRouter, cols: EventColumns, mask: pa.Array) -> None:
        args = decode_args(cols.args.filter(mask), _OP_DEC)
        present = [a if a is not None else _NO_OP_ARGS for a in args] if None in args else args
        shapes = _texts(list(map(_GET_DIMS, present)))
        types = _texts(list(map(_GET_TYPES, present)))
        stacks = _stacks(list(map(_GET_STACK, present)))
        if not self.has_shapes and pc.any(pc.match_substring_regex(shapes, r"\d")).as_py():
            self.has_shapes = True
        if not self.has_stacks and pc.any(pc.is_valid(stacks)).as_py():
            self.has_stacks = True
        name = cols.name.filter(mask)
        ts = cols.ts_ns.filter(mask)
        dur = cols.dur_ns.filter(mask)
        for j in pc.indices_nonzero(pc.fill_null(pc.starts_with(name, "ProfilerStep#"), False)).to_pylist():
            m = _STEP_RE.match(name[j].as_py())
            t0 = ts[j].as_py()
            if m and t0 is not None:
                self.steps.append((int(m.group(1)), t0, t0 + (dur[j].as_py() or 0)))
        pid = cols.pid.filter(mask)
        # an op without a category is named after its process (known after the block's M events)
        codes = Codes()
        proc_idx = np.fromiter(map(codes.__getitem__, pid.to_pylist()), dtype=np.int32, count=len(pid))
        procs = pa.array([router.process(p) or None for p in codes], pa.string())
        t = pa.table(
            {
                "name": name,
                "category": pc.coalesce(_blank_null(cols.cat.filter(mask)), procs.take(pa.array(proc_idx))),
                "tid": cols.tid.filter(mask),
                "_pid": pid,
                "ts_ns": ts,
                "dur_ns": dur,
                "input_shapes": shapes,
                "input_types": types,
                "call_stack": stacks,
                "sequence_number": pa.array(list(map(_GET_SEQ, present)), pa.int64()),
                "event_id": cols.event_id.filter(mask),
            }
        )
        self.stage.write("operators", t)

    # -- msprof timelines --------------------------------------------------------------------------------

    def _timeline(self, router: EventRouter, b: RoutedBlock, bare_x: np.ndarray) -> None:
        """Iterations, device tasks and communication-lane ops of an msprof timeline block (X events)."""
        cols = b.cols
        assert cols is not None
        is_x = b.x_sl.to_numpy(zero_copy_only=False)
        iters = is_x & pc.fill_null(pc.equal(cols.cat, "Iteration Time"), False).to_numpy(zero_copy_only=False)
        for j in np.flatnonzero(iters).tolist():
            m = _ITER_RE.match(cols.name[j].as_py() or "")
            if m:
                self._iteration(int(m.group(1)), cols.ts_ns[j].as_py(), cols.dur_ns[j].as_py())
        if not bare_x.any():
            return
        lanes = _Lanes(cols)
        on_device = lanes.flag(lambda p, t: is_device_lane(router.process(p), router.lane(p, t)))
        on_comm = lanes.flag(
            lambda p, t: (
                lane_group(LANES, router.process(p)) == "communication" and not router.lane(p, t).startswith("Plane")
            )
        )
        if self.device_tasks is not None:
            tasks = bare_x & on_device
            if tasks.any():
                self.device_tasks.pick(cols, pa.array(tasks))
            on_comm &= ~on_device
        comm = bare_x & on_comm
        if comm.any():
            self._comms(router, cols, comm, lanes)

    def _iteration(self, step: int, ts: int | None, dur: int | None) -> None:
        if ts is None:
            return
        s, end = ts, ts + (dur or 0)
        cur = self.iterations.get(step)
        self.iterations[step] = [min(cur[0], s), max(cur[1], end)] if cur else [s, end]

    def _comms(self, router: EventRouter, cols: EventColumns, mask: np.ndarray, lanes: _Lanes) -> None:
        m = pa.array(mask)
        args = decode_args(cols.args.filter(m), _HCCL_DEC)
        group_of = [_COMM_LANE_RE.match(router.lane(p, t)) for p, t in lanes.keys]
        groups = [g.group("g") if g else None for g in group_of]
        codes = lanes.code[mask]
        for name, ts, dur, a, c in zip(
            cols.name.filter(m).to_pylist(),
            cols.ts_ns.filter(m).to_pylist(),
            cols.dur_ns.filter(m).to_pylist(),
            args,
            codes.tolist(),
        ):
            self.comms.append(
                {
                    "name": name,
                    "group": groups[c],
                    "ts_ns": ts,
                    "dur_ns": dur,
                    "dtype": a.data_type if a else None,
                    "count": a.count if a else None,
                    "alg": a.alg_type if a else None,
                }
            )

    def big_comm_ops(self, router: EventRouter) -> list[dict[str, Any]]:
        """hcom_* events on the communication lanes (HCCL 'Group N Communication'), not on Plane lanes."""
        out = []
        for h in self.hccl:
            proc = router.process(h["pid"])
            lane = router.lane(h["pid"], h["tid"])
            if lane_group(LANES, proc) == "communication" and not lane.startswith("Plane") or not proc and not lane:
                out.append(h)
        return out


def _texts(values: list[str | list[Any] | None]) -> pa.Array:
    """Input Dims / Input type values as text: a string as it is (blank: null), a list as JSON."""
    try:
        arr = pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_as_text(v) for v in values], pa.string())
    blank = pc.equal(pc.utf8_trim_whitespace(arr), "")
    return pc.if_else(pc.fill_null(blank, False), pa.scalar(None, pa.string()), arr)


def _blank_null(arr: pa.Array) -> pa.Array:
    """Empty strings as nulls."""
    return pc.if_else(pc.fill_null(pc.equal(arr, ""), False), pa.scalar(None, pa.string()), arr)


def _stacks(values: list[str | None]) -> pa.Array:
    """Call stacks, one frame per line (``stack_text`` of each distinct stack: stacks repeat)."""
    codes = Codes()
    idx = np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
    return pa.array([stack_text(s) for s in codes], pa.string()).take(pa.array(idx))


class AscendTrace:
    """One collection's Ascend Chrome traces: the router, the picker and the stage of their rows."""

    def __init__(
        self,
        ctx: ReadContext,
        op_processes: frozenset[str] = frozenset(),
        device_tasks: bool = False,
        timeline: bool = False,
        collectives: Collectives | None = None,
    ):
        self.ctx = ctx
        self.stage = SpillStage(ctx.scratch_dir())
        self.picker = AscendPicker(self.stage, op_processes, device_tasks, timeline, collectives)
        self.router = EventRouter(ROUTE, self.picker, lambda sl: ctx.write("slices", sl), ctx.note)

    def feed(self, path: Path, shift_ns: int = 0) -> TraceStream:
        """Route every event of one trace file (``shift_ns``: added to every time, e.g. a device's
        monotonic clock -> epoch)."""
        self.router.start_file()
        ts = TraceStream(path, read_ahead=self.ctx.cores > 1)
        for events in ts.blocks():
            self.router.route(events, shift_ns)
        return ts

    def feed_file(self, path: Path, kind: str, shift_ns: int = 0) -> None:
        """``feed`` reported as a file of the collection (msprof timelines)."""
        with self.ctx.reading(path, kind) as outcome:
            ts = self.feed(path, shift_ns)
            outcome.rows = ts.n_events
            outcome.warn_all(ts.warnings)
            if ts.n_events == 0:
                raise InputError(str(path), problem("no_events"))

    def close(self) -> dict[str, Staged]:
        return self.stage.close()

    def write_counters(self, staged: dict[str, Staged]) -> None:
        """The staged counters, with the process names of their pids."""
        if "counters" not in staged:
            return
        names = self.router.lanes.process_names
        for b in staged["counters"].batches():
            pid = pc.dictionary_encode(b.column("_pid"))  # a few pids: each named once
            proc = pa.array([names.get(p, p) for p in pid.dictionary.to_pylist()], pa.string()).take(pid.indices)
            self.ctx.write(
                "counters", pa.table({**{c: b.column(c) for c in b.schema.names if c != "_pid"}, "process": proc})
            )

    def write_timeline(self, steps: list[tuple[int, int, int]], first_kernel_id: int) -> int:
        """msprof: iterations -> ``steps`` (added to ``steps``), device tasks -> ``kernels`` (ids from
        ``first_kernel_id``), communication lanes -> ``comm_ops``; returns the kernels written."""
        ctx, p = self.ctx, self.picker
        if p.iterations:
            its = sorted((k, v[0], v[1]) for k, v in p.iterations.items())
            steps.extend(its)
            ctx.write(
                "steps",
                {
                    "step": [s[0] for s in its],
                    "start_ns": [s[1] for s in its],
                    "end_ns": [s[2] for s in its],
                    "dur_ns": [s[2] - s[1] for s in its],
                    "source": ["Iteration"] * len(its),
                },
            )

        def step_of(ts: Any) -> list[int | None]:
            return steps_containing(steps + [(k, v[0], v[1]) for k, v in p.iterations.items()], ts)

        n = 0
        if p.device_tasks:
            n = len(p.device_tasks)
            ctx.write("kernels", p.device_tasks.columns(first_kernel_id, step_of))
        if p.comms:
            comm_steps = step_of([c["ts_ns"] for c in p.comms])
            rows = []
            for c, step in zip(p.comms, comm_steps):
                op = normalize_op_type(c["name"].rsplit("/", 1)[-1])
                rows.append(
                    {
                        "step": step,
                        "name": c["name"],
                        "op_type": op,
                        "group_name": c["group"],
                        "is_p2p": op in P2P_TYPES,
                        "ts_ns": c["ts_ns"],
                        "dur_ns": c["dur_ns"],
                        "bytes": hccl_bytes(c["dtype"], c["count"]),
                        "dtype": c["dtype"],
                        "count": int(c["count"]) if isinstance(c["count"], (int, float)) else None,
                        "alg_type": c["alg"],
                        "source": "msprof timeline",
                    }
                )
            ctx.write("comm_ops", rows)
            named = sorted({str(c["group"]) for c in p.comms if c["group"]})
            if named:  # the groups the ops name (their lanes): every table of a run knows the same groups
                ctx.write(
                    "comm_groups", [{"group_name": g, "backend": "hccl", "source": "msprof timeline"} for g in named]
                )
        return n


def outcome_of_trace(outcome: FileOutcome, ts: TraceStream) -> None:
    """A trace_view.json's outcome: its events, its warnings; an error when it holds no event."""
    outcome.rows = ts.n_events
    outcome.warn_all(ts.warnings)
    if not ts.bare_array:
        outcome.warn(problem("trace_object"))
    if ts.n_events == 0:
        raise InputError(str(ts.path), problem("no_events"))
