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
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from ...errors import InputError
from ...vocabulary import P2P_TYPES, is_comm_task, normalize_op_type
from ..base import FileOutcome, ReadContext
from ..chrome.columns import id_text, times_ns
from ..chrome.lanes import LaneRules, lane_group
from ..chrome.router import EventRouter, RoutedBlock, RouteRules
from ..chrome.stream import Event, TraceStream
from ..common.cells import task_id
from ..common.csvfile import ns_from_us_array
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


def _ts_ns(values: list[Any]) -> pa.Array:
    """Event timestamps to int64 ns: torch_npu writes exact µs strings (vectorised, exact), else numbers."""
    if values and all(type(v) is str for v in values):
        arr, todo = ns_from_us_array(values)
        if not todo:
            return arr
    return times_ns(values)


def ns_text(ns: int) -> str:
    """Exact ns as a µs decimal string (what the trace reader parses without float rounding)."""
    sign = "-" if ns < 0 else ""
    a = abs(ns)
    return f"{sign}{a // 1000}.{a % 1000:03d}"


class DeviceTasks:
    """Device tasks picked from the Ascend Hardware lanes of a chrome-trace array (the ``kernels``
    table when no CSV gives them: msprof's json timeline, a trace_view.json without kernel_details.csv)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self.cols["name"])

    def pick(self, e: Event) -> None:
        a = decode_or_none(_TASK_DEC, e.args)
        k = self.cols
        k["name"].append(e.name)
        k["core_type"].append(a.task_type if a else None)
        k["is_communication"].append(is_comm_task(a.task_type if a is not None else None, e.name))
        stream = task_id(a.stream if a and a.stream is not None else (a.physic_stream if a else None))
        k["stream_id"].append(stream if stream is not None else task_id(e.tid))
        k["task_id"].append(task_id(a.task) if a else None)
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


class AscendPicker:
    """The Ascend family's rows of each routed block (see the module doc)."""

    def __init__(
        self,
        stage: SpillStage,
        op_processes: frozenset[str] = frozenset(),
        device_tasks: bool = False,
        timeline: bool = False,
    ):
        self.stage = stage
        # processes whose X events are framework ops even without the cpu_op category (MindSpore:
        # "MindSpore", "CPU OP"); an event's process is known because M events precede its X events
        self.op_processes = op_processes
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
        events = b.events
        op_idx: list[int] = []
        for i, e in enumerate(events):
            ph = e.ph
            if ph == "X" or ph == "i" or ph == "I":
                if e.cat == "cpu_op" or (
                    self.op_processes and ph == "X" and router.process(id_text(e.pid)) in self.op_processes
                ):
                    op_idx.append(i)
                elif e.cat is None and ph == "X" and e.name.startswith("hcom_"):
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
                elif e.cat is None and e.name.startswith(CANN_LEVELS):
                    self.cann_levels[e.name.split("@", 1)[0]] += 1
                if (
                    self.device_tasks is not None
                    and not self.timeline
                    and ph == "X"
                    and e.cat is None
                    and self._on_device(router, e)
                ):
                    self.device_tasks.pick(e)
            elif ph == "M":
                router.lanes.add(e)
        if op_idx:
            self._ops(router, events, op_idx, b.first)
        if self.timeline:  # after the block's M events, so every lane of the block is named
            self._timeline(router, events)

    def counters(self, cols: dict[str, pa.Array]) -> None:
        cols["_pid"] = cols.pop("pid")
        self.stage.write("counters", pa.table(cols))

    @staticmethod
    def _on_device(router: EventRouter, e: Event) -> bool:
        pid = id_text(e.pid)
        return is_device_lane(router.process(pid), router.lane(pid, id_text(e.tid)))

    def _ops(self, router: EventRouter, events: list[Event], idx: list[int], first: int) -> None:
        evs = [events[i] for i in idx]
        args = [decode_or_none(_OP_DEC, e.args) for e in evs]
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
                "category": pa.array([e.cat or router.process(id_text(e.pid)) or None for e in evs], pa.string()),
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

    # -- msprof timelines --------------------------------------------------------------------------------

    def _timeline(self, router: EventRouter, events: list[Event]) -> None:
        for e in events:
            if e.ph != "X":
                continue
            pid = id_text(e.pid)
            tid = id_text(e.tid)
            proc = router.process(pid)
            lane = router.lane(pid, tid)
            if e.cat and e.cat == "Iteration Time":
                m = _ITER_RE.match(e.name)
                if m:
                    self._iteration(int(m.group(1)), e)
                continue
            if e.cat:
                continue
            if self.device_tasks is not None and is_device_lane(proc, lane):
                self.device_tasks.pick(e)
            elif lane_group(LANES, proc) == "communication" and not lane.startswith("Plane"):
                self._comm(e, lane)

    def _iteration(self, step: int, e: Event) -> None:
        t = times_ns([e.ts, e.dur if e.dur is not None else 0.0]).to_pylist()
        if t[0] is None:
            return
        s, end = t[0], t[0] + (t[1] or 0)
        cur = self.iterations.get(step)
        self.iterations[step] = [min(cur[0], s), max(cur[1], end)] if cur else [s, end]

    def _comm(self, e: Event, lane: str) -> None:
        a = decode_or_none(_HCCL_DEC, e.args)
        m = _COMM_LANE_RE.match(lane)
        self.comms.append(
            {
                "name": e.name,
                "group": m.group("g") if m else None,
                "ts": e.ts,
                "dur": e.dur if e.dur is not None else 0.0,
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


class AscendTrace:
    """One collection's Ascend Chrome traces: the router, the picker and the stage of their rows."""

    def __init__(
        self,
        ctx: ReadContext,
        op_processes: frozenset[str] = frozenset(),
        device_tasks: bool = False,
        timeline: bool = False,
    ):
        self.ctx = ctx
        self.stage = SpillStage(ctx.scratch_dir())
        self.picker = AscendPicker(self.stage, op_processes, device_tasks, timeline)
        self.router = EventRouter(ROUTE, self.picker, lambda sl: ctx.write("slices", sl))

    def feed(self, path: Path, to_epoch: Callable[[int], int] | None = None) -> TraceStream:
        """Route every event of one trace file (``to_epoch``: a device clock reading in ns -> epoch ns)."""
        ts = TraceStream(path)
        for events in ts.blocks():
            if to_epoch is not None:
                _to_epoch(events, to_epoch)
            self.router.route(events)
        return ts

    def feed_file(self, path: Path, kind: str, to_epoch: Callable[[int], int] | None = None) -> None:
        """``feed`` reported as a file of the collection (msprof timelines)."""
        with self.ctx.reading(path, kind) as outcome:
            ts = self.feed(path, to_epoch)
            outcome.rows = ts.n_events
            outcome.warn_all(ts.warnings)
            if ts.n_events == 0:
                raise InputError(str(path), "trace has no events")

    def close(self) -> dict[str, Staged]:
        return self.stage.close()

    def write_counters(self, staged: dict[str, Staged]) -> None:
        """The staged counters, with the process names of their pids."""
        if "counters" not in staged:
            return
        names = self.router.lanes.process_names
        for b in staged["counters"].batches():
            proc = pa.array([names.get(p, p) for p in b.column("_pid").to_pylist()], pa.string())
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

        def step_of(ts: list[int | None]) -> list[int | None]:
            return steps_containing(steps + [(k, v[0], v[1]) for k, v in p.iterations.items()], ts)

        n = 0
        if p.device_tasks:
            n = len(p.device_tasks)
            ctx.write("kernels", p.device_tasks.columns(first_kernel_id, step_of))
        if p.comms:
            ts = times_ns([c["ts"] for c in p.comms]).to_pylist()
            dur = times_ns([c["dur"] for c in p.comms]).to_pylist()
            rows = []
            for c, t0, d in zip(p.comms, ts, dur):
                op = normalize_op_type(c["name"].rsplit("/", 1)[-1])
                rows.append(
                    {
                        "step": step_of([t0])[0],
                        "name": c["name"],
                        "op_type": op,
                        "group_name": c["group"],
                        "is_p2p": op in P2P_TYPES,
                        "ts_ns": t0,
                        "dur_ns": d,
                        "bytes": hccl_bytes(c["dtype"], c["count"]),
                        "dtype": c["dtype"],
                        "count": int(c["count"]) if isinstance(c["count"], (int, float)) else None,
                        "alg_type": c["alg"],
                        "source": "msprof timeline",
                    }
                )
            ctx.write("comm_ops", pa.Table.from_pylist(rows))
        return n


def _to_epoch(events: list[Event], to_epoch: Callable[[int], int]) -> None:
    for e in events:
        if e.ts is None or e.ph == "M":
            continue
        mono = times_ns([e.ts]).to_pylist()[0] if isinstance(e.ts, str) else round(float(e.ts) * 1000)
        if mono is not None:
            e.ts = ns_text(to_epoch(mono))


def outcome_of_trace(outcome: FileOutcome, ts: TraceStream) -> None:
    """A trace_view.json's outcome: its events, its warnings; an error when it holds no event."""
    outcome.rows = ts.n_events
    outcome.warn_all(ts.warnings)
    if not ts.bare_array:
        outcome.warn("trace_view.json is a trace object, not the bare event array torch_npu writes; read anyway")
    if ts.n_events == 0:
        raise InputError(str(ts.path), "trace has no events")
