"""The CANN family's memory CSVs (docs/formats.md §1.11, §3.2).

torch_npu and MindSpore write ``memory_record.csv``, ``npu_module_mem.csv`` and ``operator_memory.csv``
with totals in **MB** (1024^2 bytes) and block sizes in KB; msprof's export writes the same files
suffixed (``memory_record_*``, ``npu_module_mem_*``, ``operator_memory_*``) plus ``npu_mem_*``, every
size in **KB** (1024 bytes). Both -> ``memory_samples`` and ``operator_memory`` in bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ...units import KIB, scaled_int
from ..base import ReadContext
from ..common.csvfile import CsvTable, iter_csv, read_csv

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


NPU_MEM_COLS = {
    "device": ("Device_id",),
    "event": ("event",),
    "ddr": ("ddr(KB)",),
    "hbm": ("hbm(KB)",),
    "memory": ("memory(KB)",),
    "ts": ("timestamp(us)",),
}


MODULE_MEM_KB_COLS = {
    "device_id": ("Device_id",),
    "component": ("Component",),
    "ts": ("Timestamp(us)",),
    "reserved": ("Total Reserved(KB)",),
    "device": ("Device",),
}


MEM_RECORD_KB_COLS = {
    "device_id": ("Device_id",),
    "component": ("Component",),
    "ts": ("Timestamp(us)",),
    "allocated": ("Total Allocated(KB)",),
    "reserved": ("Total Reserved(KB)",),
    "device": ("Device",),
}


OP_MEM_KB_COLS = {
    "device_id": ("Device_id",),
    "name": ("Name",),
    "size": ("Size(KB)",),
    "alloc": ("Allocation Time(us)",),
    "duration": ("Duration(us)",),
    "a_alloc": ("Allocation Total Allocated(KB)",),
    "a_res": ("Allocation Total Reserved(KB)",),
    "r_alloc": ("Release Total Allocated(KB)",),
    "r_res": ("Release Total Reserved(KB)",),
    "device": ("Device",),
}


def _mb_list(t: CsvTable, key: str) -> pa.Array:
    """MB cells (MB = 1024^2 bytes) as int64 bytes."""
    v = pa.array(t.floats(key), pa.float64())
    return pc.cast(pc.round(pc.multiply(v, float(1 << 20))), pa.int64())


def _device_id(device: str | None) -> int | None:
    if not device:
        return None
    m = re.search(r"(\d+)\s*$", device)
    return int(m.group(1)) if m else None


def read_memory_record(ctx: ReadContext, path: Path) -> set[int]:
    """memory_record.csv (MB) -> memory_samples; returns the device ids it names."""
    device_ids: set[int] = set()
    with ctx.reading(path, "memory_record.csv") as outcome:
        for t in iter_csv(path, "memory_record.csv", MEM_RECORD_COLS, required=("component", "ts")):
            dev = t.text("device")
            device_ids.update(x for x in (_device_id(d) for d in set(dev)) if x is not None)
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
            outcome.warn_all(t.warnings)
    return device_ids


def read_module_mem(ctx: ReadContext, path: Path) -> None:
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
            outcome.warn_all(t.warnings)


def read_operator_memory(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "operator_memory.csv") as outcome:
        for t in iter_csv(path, "operator_memory.csv", OP_MEM_COLS, required=("name", "size", "alloc")):
            size = t.floats("size")
            outcome.rows += ctx.write(
                "operator_memory",
                {
                    "name": t.text("name"),
                    "size_bytes": [scaled_int(v, 1024) for v in size],
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
            outcome.warn_all(t.warnings)


def _kb(values: list[float | None], minus_one_null: bool = False) -> list[int | None]:
    out: list[int | None] = []
    for v in values:
        if v is None or (minus_one_null and v == -1):
            out.append(None)
        else:
            out.append(scaled_int(v, KIB))
    return out


def _npu_device(device_ids: list[int | None], devices: list[str | None]) -> list[str | None]:
    out = []
    for d, name in zip(device_ids, devices):
        if name:
            out.append(name if not name.isdigit() else f"NPU:{name}")
        else:
            out.append(f"NPU:{d}" if d is not None else None)
    return out


def read_npu_mem_kb(ctx: ReadContext, path: Path) -> set[int]:
    """msprof's npu_mem_* (KB) -> memory_samples; returns the device ids it names."""
    device_ids: set[int] = set()
    with ctx.reading(path, "npu_mem") as outcome:
        t = read_csv(path, "npu_mem CSV", NPU_MEM_COLS, required=("event", "memory", "ts"))
        outcome.warn_all(t.warnings)
        dev = t.ints("device")
        device_ids.update(d for d in dev if d is not None)
        comp = [{"app": "APP", "device": "Device"}.get((e or "").lower(), e) for e in t.text("event")]
        outcome.rows = ctx.write(
            "memory_samples",
            {
                "ts_ns": t.ns_from_us("ts"),
                "component": comp,
                "device": _npu_device(dev, [None] * t.n_rows),
                "reserved_bytes": _kb(t.floats("memory")),
                "source": ["npu_mem"] * t.n_rows,
            },
        )
    return device_ids


def read_module_mem_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "npu_module_mem") as outcome:
        t = read_csv(path, "npu_module_mem CSV", MODULE_MEM_KB_COLS, required=("component", "ts", "reserved"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "memory_samples",
            {
                "ts_ns": t.ns_from_us("ts"),
                "component": t.text("component"),
                "device": _npu_device(t.ints("device_id"), t.text("device")),
                "reserved_bytes": _kb(t.floats("reserved"), minus_one_null=True),
                "source": ["npu_module_mem"] * t.n_rows,
            },
        )


def read_memory_record_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "memory_record") as outcome:
        t = read_csv(path, "memory_record CSV", MEM_RECORD_KB_COLS, required=("component", "ts"))
        outcome.warn_all(t.warnings)
        outcome.rows = ctx.write(
            "memory_samples",
            {
                "ts_ns": t.ns_from_us("ts"),
                "component": t.text("component"),
                "device": _npu_device(t.ints("device_id"), t.text("device")),
                "allocated_bytes": _kb(t.floats("allocated")),
                "reserved_bytes": _kb(t.floats("reserved")),
                "source": ["memory_record"] * t.n_rows,
            },
        )


def read_operator_memory_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "operator_memory") as outcome:
        t = read_csv(path, "operator_memory CSV", OP_MEM_KB_COLS, required=("name", "size", "alloc"))
        outcome.warn_all(t.warnings)
        alloc = t.ns_from_us("alloc")
        duration = t.ns_from_us("duration")
        release = [a + d if a is not None and d is not None else None for a, d in zip(alloc, duration)]
        outcome.rows = ctx.write(
            "operator_memory",
            {
                "name": t.text("name"),
                "size_bytes": _kb(t.floats("size")),
                "alloc_ns": alloc,
                "release_ns": release,
                "duration_ns": duration,
                "alloc_allocated_bytes": _kb(t.floats("a_alloc")),
                "alloc_reserved_bytes": _kb(t.floats("a_res")),
                "release_allocated_bytes": _kb(t.floats("r_alloc")),
                "release_reserved_bytes": _kb(t.floats("r_res")),
                "device": _npu_device(t.ints("device_id"), t.text("device")),
            },
        )
