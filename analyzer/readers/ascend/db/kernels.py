"""The device kernels of a profiler db (TASK + COMPUTE_TASK_INFO, one HCCL row per COMMUNICATION_OP),
their PMU metrics (TASK_PMU_INFO) and the op / API statistics computed with msprof's definitions."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ....units import fit_ns
from ...base import ReadContext
from ..kernels import pmu_metric_name
from .sqlite import DbExport, columns_of, db_text, sql_string


def read_kernels(ctx: ReadContext, st: DbExport) -> None:
    db = st.db
    ccols = db.columns("COMPUTE_TASK_INFO")

    def opt(c: str, alias: str) -> str:
        return f"c.{c}" if c in ccols else f"NULL AS {alias}"

    def ostr(c: str, alias: str) -> str:
        return sql_string(f"c.{c}", alias) if c in ccols else f"NULL AS {alias}"

    block = "c.blockNum" if "blockNum" in ccols else opt("blockDim", "block")
    mix = "c.mixBlockNum" if "mixBlockNum" in ccols else opt("mixBlockDim", "mix")
    # wait time: gap since the previous task on the same stream (msprof's definition)
    sql = f"""
        WITH w AS (
          SELECT globalTaskId, startNs - lag(endNs) OVER (PARTITION BY deviceId, streamId ORDER BY startNs) AS gap
          FROM TASK)
        SELECT t.globalTaskId, t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId,
               {sql_string("c.name", "name")}, {ostr("opType", "optype")}, {ostr("taskType", "ttype")}, {block}, {mix},
               {ostr("opState", "state")}, {ostr("inputShapes", "ish")}, {ostr("inputDataTypes", "idt")},
               {ostr("inputFormats", "ifm")}, {ostr("outputShapes", "osh")}, {ostr("outputDataTypes", "odt")},
               {ostr("outputFormats", "ofm")}, w.gap
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
        LEFT JOIN w ON w.globalTaskId = t.globalTaskId
        ORDER BY t.startNs
    """
    rows = db.all(sql) if db.has("TASK") and db.has("COMPUTE_TASK_INFO") else []
    comm = st.comm_ops_raw
    # one ordered list: compute kernels + one HCCL row per communication op, like kernel_details.csv
    items: list[tuple[int, int, Any]] = [(int(r[1]), 0, r) for r in rows] + [(c["ts"], 1, c) for c in comm]
    items.sort(key=lambda x: (x[0], x[1]))
    out: dict[str, list[Any]] = defaultdict(list)
    task_ids: list[int] = []
    kernel_ids: list[int] = []
    for kid, (ts, kind, r) in enumerate(items):
        if kind == 0:
            gid, s, e, dev, stream, task, name, optype, ttype, blk, mixb, state, ish, idt, ifm, osh, odt, ofm, gap = r
            task_ids.append(int(gid))
            kernel_ids.append(kid)
            row = {
                "name": name,
                "op_type": db_text(optype),
                "core_type": db_text(ttype),
                "is_communication": False,
                "device_id": dev,
                "stream_id": stream,
                "task_id": task,
                "ts_ns": fit_ns(s),  # a REAL beyond 64 bits (SQLite keeps it so) saturates, to be named
                "dur_ns": fit_ns(e) - fit_ns(s),  # a negative one is named by the fact writer, not clamped
                "wait_ns": max(int(gap), 0) if gap is not None else 0,
                "block_dim": blk,
                "mix_block_dim": mixb,
                "op_state": db_text(state),
                "input_shapes": db_text(ish),
                "input_dtypes": db_text(idt),
                "input_formats": db_text(ifm),
                "output_shapes": db_text(osh),
                "output_dtypes": db_text(odt),
                "output_formats": db_text(ofm),
            }
        else:
            row = {
                "name": r["name"],
                "op_type": db_text(r["op_type_raw"]),
                "core_type": "HCCL",
                "is_communication": True,
                "device_id": next(iter(st.devices)) if len(st.devices) == 1 else None,
                "stream_id": None,
                "task_id": None,
                "ts_ns": r["ts"],
                "dur_ns": r["dur"],
                "wait_ns": r["wait"],
                "block_dim": None,
                "mix_block_dim": None,
                "op_state": None,
                "input_shapes": None,
                "input_dtypes": None,
                "input_formats": None,
                "output_shapes": None,
                "output_dtypes": None,
                "output_formats": None,
            }
        row["kernel_id"] = kid
        row["step"] = st.step_of(ts)
        for k, v in row.items():
            out[k].append(v)
    if out:
        ctx.write("kernels", dict(out))
    if task_ids:
        order = np.argsort(np.asarray(task_ids, dtype=np.int64), kind="stable")
        st.kernel_of_task = (np.asarray(task_ids, dtype=np.int64)[order], np.asarray(kernel_ids, dtype=np.int64)[order])
        _op_statistic(ctx, out)


def _op_statistic(ctx: ReadContext, k: dict[str, list[Any]]) -> None:
    """op_statistic.csv's numbers from the compute kernels: per (OP Type, Core Type) count, total,
    min, avg, max and share of the total compute kernel time."""
    groups: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for name, ot, ct, d, comm in zip(k["name"], k["op_type"], k["core_type"], k["dur_ns"], k["is_communication"]):
        if not comm:
            groups[(ot if ot is not None else name, ct)].append(int(d))
    total_all = sum(sum(v) for v in groups.values()) or 1
    rows = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    ctx.write(
        "statistics",
        {
            "kind": ["op_statistic"] * len(rows),
            "name": [g[0] for g, _ in rows],
            "core_type": [g[1] for g, _ in rows],
            "count": [len(v) for _, v in rows],
            "total_ns": [sum(v) for _, v in rows],
            "min_ns": [min(v) for _, v in rows],
            "avg_ns": [round(sum(v) / len(v)) for _, v in rows],
            "max_ns": [max(v) for _, v in rows],
            "ratio_pct": [100.0 * sum(v) / total_all for _, v in rows],
        },
    )


def api_statistic(ctx: ReadContext, st: DbExport) -> None:
    """api_statistic.csv's numbers from CANN_API: per (level, API name) time, count, avg, min, max, variance."""
    rows = st.db.all(
        f"SELECT type, {sql_string('name', 'name')}, count(*), sum(endNs - startNs), min(endNs - startNs), "
        f"max(endNs - startNs), avg((endNs - startNs) * 1.0 * (endNs - startNs)) FROM CANN_API GROUP BY type, name "
        f"ORDER BY sum(endNs - startNs) DESC"
    )
    if not rows:
        return
    out: dict[str, list[Any]] = defaultdict(list)
    for typ, name, cnt, tot, mn, mx, sq in rows:
        avg = tot / cnt
        out["kind"].append("api_statistic")
        out["level"].append(st.api_types.get(int(typ), str(typ)) if typ is not None else None)
        out["name"].append(name)
        out["count"].append(cnt)
        out["total_ns"].append(int(tot))
        out["min_ns"].append(int(mn))
        out["avg_ns"].append(round(avg))
        out["max_ns"].append(int(mx))
        out["variance_ns2"].append(max(float(sq) - avg * avg, 0.0))
    ctx.write("statistics", dict(out))


def read_pmu(ctx: ReadContext, st: DbExport) -> None:
    assert st.kernel_of_task is not None
    tasks, kids = st.kernel_of_task
    names = {
        int(i): pmu_metric_name(str(v))
        for i, v in st.db.all("SELECT DISTINCT p.name, s.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name")
    }
    for rows in st.db.batches("SELECT globalTaskId, name, value FROM TASK_PMU_INFO"):
        gid, nm, val = columns_of(rows, 3)
        g = np.asarray(gid, dtype=np.int64)
        pos = np.searchsorted(tasks, g)
        pos = np.minimum(pos, len(tasks) - 1)
        ok = tasks[pos] == g
        vals = np.asarray([float(v) if v is not None else np.nan for v in val], dtype=np.float64)
        ok &= ~np.isnan(vals)
        sel = np.nonzero(ok)[0]
        if len(sel):
            ctx.write(
                "kernel_metrics",
                {
                    "kernel_id": kids[pos[sel]],
                    "metric": [names.get(int(nm[i]), str(nm[i])) for i in sel],
                    "value": vals[sel],
                },
            )
