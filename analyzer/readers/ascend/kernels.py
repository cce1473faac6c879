"""The CANN family's device kernels: ``kernel_details.csv`` (torch_npu, MindSpore) and msprof's
``op_summary_*.csv`` (the same columns under older names; docs/formats.md §1.6, §3.2), with their PMU
columns and ``l2_cache.csv``.

One row per device task -> ``kernels`` (times parsed from exact µs strings); every PMU column ->
``kernel_metrics`` in long form, named with its unit (``metric_name``); L2 hit / victim rates joined
to the kernels by (stream id, task id), by name order when ids are missing (Level0).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import problem
from ...vocabulary import COMM_OP_PREFIX, is_comm_task
from ..base import ReadContext
from ..common.csvfile import CsvTable, iter_csv, read_csv

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


def pmu_metric_name(name: str) -> str:
    """TASK_PMU_INFO metric name -> kernel_metrics name with its unit (db times are ns, bandwidths B/s)."""
    if name.endswith("_time"):
        return f"{name}_ns"
    if name.endswith("_bw"):
        return f"{name}_bytes_per_s"
    return name


@dataclass
class KernelsRead:
    """What reading a kernel file found, for the rest of the collection."""

    n: int = 0  # kernels written
    device_ids: set[int] = field(default_factory=set)
    comm: list[dict[str, Any]] = field(default_factory=list)  # communication rows: name, step, ts, dur
    metrics: bool = False  # PMU columns written to kernel_metrics
    l2: bool = False  # L2 rates written to kernel_metrics


def comm_tasks(task_types: list[str | None], *names: list[str | None]) -> list[bool]:
    """``vocabulary.is_comm_task`` of every row at once: the task type's rule once per distinct type,
    the names' ``hcom_`` prefix with Arrow."""
    enc = pc.dictionary_encode(pa.array(task_types, pa.string()))
    per_type = pa.array([is_comm_task(t) for t in enc.dictionary.to_pylist()], pa.bool_())
    hit = pc.fill_null(per_type.take(enc.indices), False)
    for col in names:
        hit = pc.or_(hit, pc.fill_null(pc.starts_with(pa.array(col, pa.string()), COMM_OP_PREFIX), False))
    return hit.to_pylist()


def read_kernels(
    ctx: ReadContext,
    path: Path,
    l2_path: Path | None = None,
    kind: str = "kernel_details.csv",
    first_kernel_id: int = 0,
    step_of: Callable[[list[int | None]], list[int | None]] | None = None,
) -> KernelsRead:
    """kernels (+ kernel_metrics) from kernel_details.csv or msprof's op_summary (``kind``), ids from
    ``first_kernel_id`` (sliced files continue the numbering).
    ``step_of``: steps of the start times, for files without a step column (msprof's op_summary).
    Read in chunks of rows; only what the L2 join needs (ids, stream, task, name, start) is kept."""
    index: dict[str, list[Any]] = {"kernel_id": [], "name": [], "stream_id": [], "task_id": [], "ts_ns": []}
    complete = False
    st = KernelsRead()
    with ctx.reading(path, kind) as outcome:
        for t in iter_csv(path, kind, KERNEL_COLS, required=("name", "start", "dur"), keep_extra=True):
            n = t.n_rows
            st.n += n
            kid0 = first_kernel_id + t.first_row
            names = t.text("name")
            op_type = t.text("type")
            core = t.text("core")
            is_comm = comm_tasks(core, names, op_type)
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
            outcome.warn_all(t.warnings)
            for i in compress(range(n), is_comm):
                st.comm.append({"name": names[i], "step": steps[i], "ts": ts[i], "dur": dur[i]})
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
                raise InputError(str(l2_path), problem("l2_kind_unread", kind=kind))
            outcome.rows = _read_l2(ctx, st, l2_path, index, outcome)
    return st


def _write_metrics(ctx: ReadContext, st: KernelsRead, t: CsvTable, first_kernel_id: int = 0) -> int:
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
    st.metrics = True
    return ctx.write("kernel_metrics", pa.concat_tables(parts))


def _read_l2(ctx: ReadContext, st: KernelsRead, path: Path, k: dict[str, list[Any]], outcome: Any) -> int:
    t = read_csv(path, "l2_cache.csv", L2_COLS, required=("hit", "victim"))
    outcome.warn_all(t.warnings)
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
        outcome.warn(problem("l2_unmatched", n=unmatched, total=t.n_rows))
    if kid:
        st.l2 = True
    return ctx.write("kernel_metrics", {"kernel_id": kid, "metric": metric, "value": value}) if kid else 0
