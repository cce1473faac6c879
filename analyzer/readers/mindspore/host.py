"""MindSpore's host-CPU files, text written straight by the framework (no parser needed):
``cpu_ms_memory_record_{r}.txt``, ``cpu_op_type_info_{r}.csv``, ``cpu_op_detail_info_{r}.csv``,
``cpu_op_execute_timestamp_{r}.txt`` and ``cpu_framework_{r}.txt``.

MindSpore ≥ 2.5 keeps them in ``*_ascend_ms/FRAMEWORK/`` (on a CPU-only run the only parsed output
is ``ASCEND_PROFILER_OUTPUT/trace_view.json``); MindSpore ≤ 2.4 writes them flat in ``profiler/``.
Because they are written while the job runs, they survive a job that died before the profiler's
``analyse()``: then the operators come from ``cpu_op_execute_timestamp`` instead of the trace.

- ``cpu_ms_memory_record_{r}.txt`` -> ``Timestamp(ns),Total Allocated(Byte),Total Reserved(Byte),Total Active(Byte)``;
  ``memory_samples`` (component ``MindSpore``, device ``CPU``)
- ``cpu_op_type_info_{r}.csv`` ->
  ``op_type,type_occurrences,execution_frequency(per-step),total_compute_time,avg_time(ms),percent`` (ms; percent is a
  fraction); ``statistics`` kind ``cpu_op_type``
- ``cpu_op_detail_info_{r}.csv`` ->
  ``op_side,op_type,op_name,full_op_name,op_occurrences,op_total_time(ms),op_avg_time(ms),total_proportion,subgraph,pid``;
  ``statistics`` kind ``cpu_op_detail``
- ``cpu_op_execute_timestamp_{r}.txt`` -> one line per op: ``full_name;type;start_ns,dur_ms,tid start_ns,dur_ms,tid
  ...``; ``operators`` + ``slices`` (only when there is no trace)
- ``cpu_framework_{r}.txt`` -> ``type;name;graph;input_1:[shape];...``; input shapes of those operators (when the op
  name is unambiguous)
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import problem
from ...units import fit_ns
from ...vocabulary import P2P_TYPES
from ..base import ReadContext
from ..chrome.nesting import self_time
from ..common.cells import decimal_text_to_ns
from ..common.csvfile import read_csv

CPU_FILE_RE = re.compile(
    r"^(?P<kind>cpu_ms_memory_record|cpu_op_type_info|cpu_op_detail_info|cpu_op_execute_timestamp|cpu_framework)"
    r"_(?P<rank>\d+)\.(?:txt|csv)$"
)
CPU_PROCESS = "CPU OP"  # process name MindSpore gives the host CPU ops in trace_view.json

MEMORY_COLS = {
    "ts": ("Timestamp(ns)",),
    "allocated": ("Total Allocated(Byte)",),
    "reserved": ("Total Reserved(Byte)",),
    "active": ("Total Active(Byte)",),
}
TYPE_INFO_COLS = {
    "type": ("op_type",),
    "count": ("type_occurrences",),
    "total": ("total_compute_time", "total_time"),
    "avg": ("avg_time(ms)",),
    "percent": ("percent",),
}
DETAIL_INFO_COLS = {
    "side": ("op_side",),
    "type": ("op_type",),
    "full": ("full_op_name",),
    "count": ("op_occurrences",),
    "total": ("op_total_time(ms)",),
    "avg": ("op_avg_time(ms)",),
    "proportion": ("total_proportion",),
}


def cpu_files(files: list[Path]) -> dict[str, Path]:
    """The host-CPU text files among ``files``, by kind (first one of each kind)."""
    out: dict[str, Path] = {}
    for p in sorted(files):
        m = CPU_FILE_RE.match(p.name)
        if m and m.group("kind") not in out:
            out[m.group("kind")] = p
    return out


def read_memory_record(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "cpu_ms_memory_record") as outcome:
        t = read_csv(path, "cpu_ms_memory_record", MEMORY_COLS, required=("ts", "allocated"))
        outcome.warn_all(t.warnings)
        n = t.n_rows
        outcome.rows = ctx.write(
            "memory_samples",
            {
                "ts_ns": t.ints("ts"),
                "component": ["MindSpore"] * n,
                "device": ["CPU"] * n,
                "allocated_bytes": t.ints("allocated"),
                "reserved_bytes": t.ints("reserved"),
                "active_bytes": t.ints("active"),
                "source": ["cpu_ms_memory_record"] * n,
            },
        )


def _ms_ns(values: list[float | None]) -> list[int | None]:
    return [None if v is None else fit_ns(v * 1_000_000) for v in values]


def read_op_type_info(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "cpu_op_type_info") as outcome:
        t = read_csv(path, "cpu_op_type_info", TYPE_INFO_COLS, required=("type", "count", "total"))
        outcome.warn_all(t.warnings)
        pct = t.floats("percent")
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["cpu_op_type"] * t.n_rows,
                "name": t.text("type"),
                "core_type": ["CPU"] * t.n_rows,
                "count": t.ints("count"),
                "total_ns": _ms_ns(t.floats("total")),
                "avg_ns": _ms_ns(t.floats("avg")),
                "ratio_pct": [None if v is None else v * 100 for v in pct],
            },
        )


def read_op_detail_info(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "cpu_op_detail_info") as outcome:
        t = read_csv(path, "cpu_op_detail_info", DETAIL_INFO_COLS, required=("full", "count", "total"))
        outcome.warn_all(t.warnings)
        prop = t.floats("proportion")
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["cpu_op_detail"] * t.n_rows,
                "name": t.text("full"),
                "core_type": t.text("side"),
                "count": t.ints("count"),
                "total_ns": _ms_ns(t.floats("total")),
                "avg_ns": _ms_ns(t.floats("avg")),
                "ratio_pct": [None if v is None else v * 100 for v in prop],
            },
        )


def parse_execute_timestamps(path: Path) -> tuple[dict[str, list[Any]], list[str]]:
    """Rows (name, type, ts_ns, dur_ns, tid) of ``cpu_op_execute_timestamp_{r}.txt`` and warnings."""
    rows: dict[str, list[Any]] = {"name": [], "type": [], "ts_ns": [], "dur_ns": [], "tid": []}
    warnings: list[str] = []
    bad = 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            str(path), problem("cannot_read_kind", kind="cpu_op_execute_timestamp", detail=exc.strerror or exc)
        ) from exc
    if not text.strip():
        raise InputError(str(path), problem("empty_cpu_timestamps"))
    lines = text.splitlines()
    cut = not text.endswith("\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        parts = line.split(";")
        if len(parts) < 3:
            bad += 1
            continue
        name, typ, records = parts[0], parts[1], parts[2]
        recs = records.split()
        if cut and k == len(lines) - 1:
            warnings.append(problem("ends_mid_line"))
        for rec in recs:
            f = rec.split(",")
            if len(f) < 2:
                bad += 1
                continue
            try:
                ts = int(f[0])
                dur = decimal_text_to_ns(f[1])
                if dur is None:
                    raise ValueError(f[1])
            except ValueError:
                bad += 1
                continue
            rows["name"].append(name)
            rows["type"].append(typ)
            rows["ts_ns"].append(ts)
            rows["dur_ns"].append(dur)
            rows["tid"].append(f[2] if len(f) > 2 and f[2] else "0")
    if bad:
        warnings.append(problem("malformed_records", n=bad))
    if not rows["name"]:
        raise InputError(str(path), problem("no_cpu_records"))
    return rows, warnings


def parse_framework_shapes(path: Path) -> tuple[dict[str, str], list[str]]:
    """{op name (e.g. MatMul-op0): input shapes} from ``cpu_framework_{r}.txt``, only for op names
    whose every record gives the same shapes (names repeat across graphs)."""
    seen: dict[str, set[str]] = defaultdict(set)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(
            str(path), problem("cannot_read_kind", kind="cpu_framework", detail=exc.strerror or exc)
        ) from exc
    if not text.strip():
        raise InputError(str(path), problem("empty_cpu_shapes"))
    for line in text.splitlines():
        parts = [p for p in line.strip().split(";") if p != ""]
        if len(parts) < 3:
            continue
        shapes = []
        for p in parts[3:]:
            _k, _, v = p.partition(":")
            shapes.append(v.strip())
        seen[parts[1]].add(";".join(shapes))
    unique = {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}
    return unique, []


def write_cpu_ops_from_timestamps(ctx: ReadContext, path: Path, shapes_path: Path | None) -> int:
    """Operators, slices and a lane from ``cpu_op_execute_timestamp`` (no trace_view.json).

    The timestamps are the framework's raw clock readings: MindSpore's parser shifts them by a few
    tens of ns when it writes trace_view.json, so they are close to, not identical with, a trace."""
    with ctx.reading(path, "cpu_op_execute_timestamp") as outcome:
        rows, warnings = parse_execute_timestamps(path)
        outcome.warn_all(warnings)
        shapes: dict[str, str] = {}
        if shapes_path is not None:
            with ctx.reading(shapes_path, "cpu_framework") as so:
                shapes, sw = parse_framework_shapes(shapes_path)
                so.warn_all(sw)
                so.rows = len(shapes)
        n = len(rows["name"])
        order = sorted(range(n), key=lambda i: (rows["tid"][i], rows["ts_ns"][i], -rows["dur_ns"][i]))
        name = [rows["name"][i] for i in order]
        typ = [rows["type"][i] for i in order]
        tid = [rows["tid"][i] for i in order]
        ts = np.array([rows["ts_ns"][i] for i in order], dtype=np.int64)
        dur = np.array([rows["dur_ns"][i] for i in order], dtype=np.int64)
        eid = np.arange(n, dtype=np.int64)
        pid = pa.array([CPU_PROCESS] * n, pa.string())
        nest = self_time(
            pa.table({"_pid": pid, "tid": pa.array(tid, pa.string()), "ts_ns": ts, "dur_ns": dur, "event_id": eid})
        )
        in_shapes = [shapes.get(nm.rsplit("/", 1)[-1]) for nm in name]
        outcome.rows = ctx.write(
            "operators",
            {
                "name": name,
                "category": [CPU_PROCESS] * n,
                "tid": tid,
                "ts_ns": ts,
                "dur_ns": dur,
                "self_ns": nest.column("self_ns"),
                "depth": nest.column("depth"),
                "input_shapes": in_shapes,
                "event_id": eid,
            },
        )
        ctx.write(
            "slices",
            {
                "pid": pid,
                "tid": tid,
                "name": name,
                "category": [None] * n,
                "ts_ns": ts,
                "dur_ns": dur,
                "event_id": eid,
                "args": [json.dumps({"type": t}) for t in typ],
            },
        )
        counts: dict[str, int] = defaultdict(int)
        for t in tid:
            counts[t] += 1
        tids = sorted(counts)
        ctx.write(
            "lanes",
            {
                "pid": [CPU_PROCESS] * len(tids),
                "tid": tids,
                "process": [CPU_PROCESS] * len(tids),
                "lane": [f"Thread {t}" for t in tids],
                "lane_group": ["host"] * len(tids),
                "n_slices": [counts[t] for t in tids],
            },
        )
        if any(in_shapes):
            ctx.meta.capabilities.add("shapes")
        return n


# MindSpore collective primitives (the op name is "{Primitive}-op{N}") -> comm_ops.op_type
COLLECTIVES = {
    "AllReduce": "allreduce",
    "AllGather": "allgather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "AlltoAll": "alltoall",
    "AllToAll": "alltoall",
    "AlltoAllV": "alltoall",
    "NeighborExchange": "alltoall",
    "NeighborExchangeV2": "alltoall",
    "Send": "send",
    "Receive": "recv",
    "Barrier": "barrier",
    "BatchISendIRecv": "batch_send_recv",
    "CollectiveScatter": "scatter",
    "CollectiveGather": "gather",
}
_PRIM_RE = re.compile(r"^(?P<prim>[A-Za-z0-9]+)-op\d+")


def collective_type(full_name: str) -> str | None:
    """'Default/AllReduce-op3' -> 'allreduce'; None for a compute op."""
    m = _PRIM_RE.match(full_name.rsplit("/", 1)[-1])
    return COLLECTIVES.get(m.group("prim")) if m else None


def write_cpu_comm_ops(ctx: ReadContext, picked: list[pa.Table]) -> int:
    """comm_ops from the collective primitives on the ``CPU OP`` lane of a CPU run's trace_view.json
    (MindSpore on CPU runs its collectives as host ops: their duration is the communication time),
    as the trace's router picked them (``AscendPicker`` with ``collectives=(CPU_PROCESS, collective_type)``)."""
    if not picked:
        return 0
    t = pa.concat_tables(picked)
    return ctx.write(
        "comm_ops",
        {
            "name": t.column("name"),
            "op_type": t.column("op_type"),
            "is_p2p": pc.is_in(t.column("op_type"), value_set=pa.array(sorted(P2P_TYPES), pa.string())),
            "ts_ns": t.column("ts_ns"),
            "dur_ns": t.column("dur_ns"),
            "source": pa.repeat(pa.scalar("mindspore:cpu_op"), t.num_rows),
        },
    )
