"""The memory tables of a profiler db: MEMORY_RECORD, NPU_MEM, NPU_MODULE_MEM -> ``memory_samples``,
OP_MEMORY -> ``operator_memory``; NPU_OP_MEM (msprof's own db) -> both."""

from __future__ import annotations

from typing import Any

from ...base import ReadContext
from .sqlite import DbExport, columns_of, enum_names, sql_string


def read_memory_record(ctx: ReadContext, st: DbExport) -> None:
    for rows in st.db.batches(
        f"SELECT timestamp, {sql_string('component', 'comp')}, deviceId, totalAllocated, totalReserved, totalActive, "
        "streamPtr "
        f"FROM MEMORY_RECORD ORDER BY timestamp"
    ):
        ts, comp, dev, alloc, res, act, ptr = columns_of(rows, 7)
        ctx.write(
            "memory_samples",
            {
                "ts_ns": ts,
                "component": comp,
                "device": [f"NPU:{d}" if d is not None else None for d in dev],
                "allocated_bytes": alloc,
                "reserved_bytes": res,
                "active_bytes": act,
                "stream_ptr": ptr,
                "source": ["MEMORY_RECORD"] * len(ts),
            },
        )


def _npu_mem_rows(st: DbExport) -> list[tuple[Any, ...]]:
    return st.db.all(
        f"SELECT timestampNs, {sql_string('type', 'kind')}, ddr, hbm, deviceId FROM NPU_MEM ORDER BY timestampNs"
    )


def read_npu_mem(ctx: ReadContext, st: DbExport) -> None:
    """APP rows of memory_record.csv (process-level reserved = DDR + HBM) and the NPU MEM counters."""
    rows = _npu_mem_rows(st)
    app = [r for r in rows if str(r[1]).lower() == "app"]
    if app:
        ctx.write(
            "memory_samples",
            {
                "ts_ns": [int(r[0]) for r in app],
                "component": ["APP"] * len(app),
                "device": [f"NPU:{r[4]}" if r[4] is not None else None for r in app],
                "reserved_bytes": [int((r[2] or 0) + (r[3] or 0)) for r in app],
                "source": ["NPU_MEM"] * len(app),
            },
        )
    names, ts, vals = [], [], []
    for t, kind, ddr, hbm, _dev in rows:
        label = "APP" if str(kind).lower() == "app" else str(kind).capitalize()
        for part, v in (("DDR", ddr), ("HBM", hbm), ("Memory", (ddr or 0) + (hbm or 0))):
            names.append(f"{label}/{part}")
            ts.append(int(t))
            vals.append(float(v or 0) / 1024.0)
    if ts:
        ctx.write(
            "counters",
            {"process": ["NPU MEM"] * len(ts), "name": names, "series": ["KB"] * len(ts), "ts_ns": ts, "value": vals},
        )


def read_module_mem(ctx: ReadContext, st: DbExport) -> None:
    modules = enum_names(st.db, "ENUM_MODULE")
    for rows in st.db.batches(
        "SELECT timestampNs, moduleId, totalReserved, deviceId FROM NPU_MODULE_MEM ORDER BY timestampNs"
    ):
        ts, mod, res, dev = columns_of(rows, 4)
        ctx.write(
            "memory_samples",
            {
                "ts_ns": ts,
                "component": [modules.get(int(m), str(m)) if m is not None else None for m in mod],
                "device": [f"NPU:{d}" if d is not None else None for d in dev],
                "reserved_bytes": [int(r) if r is not None else None for r in res],
                "source": ["NPU_MODULE_MEM"] * len(ts),
            },
        )


def read_op_memory(ctx: ReadContext, st: DbExport) -> None:
    for rows in st.db.batches(
        f"SELECT {sql_string('name', 'name')}, size, allocationTime, releaseTime, activeReleaseTime, duration, "
        "activeDuration, "
        f"allocationTotalAllocated, allocationTotalReserved, allocationTotalActive, releaseTotalAllocated, "
        f"releaseTotalReserved, releaseTotalActive, streamPtr, deviceId FROM OP_MEMORY ORDER BY allocationTime"
    ):
        c = columns_of(rows, 15)
        ctx.write(
            "operator_memory",
            {
                "name": c[0],
                "size_bytes": c[1],
                "alloc_ns": c[2],
                "release_ns": c[3],
                "active_release_ns": c[4],
                "duration_ns": c[5],
                "active_duration_ns": c[6],
                "alloc_allocated_bytes": c[7],
                "alloc_reserved_bytes": c[8],
                "alloc_active_bytes": c[9],
                "release_allocated_bytes": c[10],
                "release_reserved_bytes": c[11],
                "release_active_bytes": c[12],
                "stream_ptr": c[13],
                "device": [f"NPU:{d}" if d is not None else None for d in c[14]],
            },
        )


def read_npu_op_mem(ctx: ReadContext, st: DbExport) -> None:
    """CANN operator memory events, read when the db has no MEMORY_RECORD / OP_MEMORY (msprof's own db:
    its text export derives memory_record and operator_memory from this table, and so do we; in
    torch_npu's db these rows are already the GE rows of MEMORY_RECORD). Allocator totals over time go
    to ``memory_samples``; each allocate event paired with the next release of the same (operator,
    address, component) to ``operator_memory`` (a block still held at the end has no release; a
    release with no allocation before it is not a block)."""
    kinds = {k: v.lower() for k, v in enum_names(st.db, "ENUM_MEMORY").items()}
    rows = st.db.all(
        f"SELECT {sql_string('operatorName', 'name')}, addr, type, size, timestampNs, totalAllocate, totalReserve, "
        f"{sql_string('component', 'comp')}, deviceId FROM NPU_OP_MEM ORDER BY timestampNs, rowid"
    )
    if not rows:
        return

    def dev(d: Any) -> str | None:
        return f"NPU:{d}" if d is not None else None

    ctx.write(
        "memory_samples",
        {
            "ts_ns": [int(r[4]) for r in rows],
            "component": [r[7] for r in rows],
            "device": [dev(r[8]) for r in rows],
            "allocated_bytes": [r[5] for r in rows],
            "reserved_bytes": [r[6] for r in rows],
            "source": ["NPU_OP_MEM"] * len(rows),
        },
    )
    held: dict[tuple[Any, Any], tuple[Any, ...]] = {}
    blocks: list[dict[str, Any]] = []

    def block(a: tuple[Any, ...], r: tuple[Any, ...] | None) -> dict[str, Any]:
        return {
            "name": a[0],
            "size_bytes": a[3],
            "alloc_ns": int(a[4]),
            "release_ns": int(r[4]) if r else None,
            "duration_ns": int(r[4]) - int(a[4]) if r else None,
            "alloc_allocated_bytes": a[5],
            "alloc_reserved_bytes": a[6],
            "release_allocated_bytes": r[5] if r else None,
            "release_reserved_bytes": r[6] if r else None,
            "device": dev(a[8]),
        }

    for r in rows:
        key = (r[0], r[1], r[7])  # operator, address, component (APP and PTA+GE records are apart)
        kind = kinds.get(int(r[2])) if r[2] is not None else None
        release = kind in ("release", "free") if kind in ("allocate", "release", "free") else key in held
        if release and key in held:
            blocks.append(block(held.pop(key), r))
        elif not release:
            if key in held:  # allocated again without a release in between: the first block's end is unknown
                blocks.append(block(held.pop(key), None))
            held[key] = r
    blocks.extend(block(a, None) for a in held.values())
    if blocks:
        blocks.sort(key=lambda b: b["alloc_ns"])
        ctx.write("operator_memory", {k: [b[k] for b in blocks] for k in blocks[0]})
