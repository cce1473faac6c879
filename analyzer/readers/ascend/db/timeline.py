"""The timeline tables of a profiler db -> ``slices`` / ``lanes`` (Python, CANN, Ascend Hardware, HCCL,
Overlap Analysis), ``operators`` (PYTORCH_API), ``steps`` (STEP_TIME) and the AI Core frequency counter."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ....units import fit_ns
from ...base import ReadContext
from ...chrome.nesting import subtree_sum
from ...common.spill import SpillStage, Staged
from ..groups import Groups, group_key
from ..host_ops import nest_order, nesting, step_of_starts, time_order, write_in_order
from .sqlite import Db, DbExport, args_json, columns_of, enum_names, sql_string

_CANN_PREFIX = {"acl": "AscendCL", "runtime": "Runtime", "node": "Node", "model": "Model", "hccl": "Hccl"}


_OVERLAP = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}


_PY_CATEGORY = {"op": "cpu_op", "trace": "python_function", "mstx": "mstx"}


def read_steps(ctx: ReadContext, st: DbExport) -> None:
    rows = st.db.all("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs")
    st.steps = [(int(i), fit_ns(s), fit_ns(e)) for i, s, e in rows if i is not None and s is not None and e is not None]
    if st.steps:
        ctx.write(
            "steps",
            {
                "step": [s[0] for s in st.steps],
                "start_ns": [s[1] for s in st.steps],
                "end_ns": [s[2] for s in st.steps],
                "dur_ns": [s[2] - s[1] for s in st.steps],
                "source": ["STEP_TIME"] * len(st.steps),
            },
        )


def read_pytorch_api(ctx: ReadContext, st: DbExport, stage: SpillStage) -> None:
    db = st.db
    cols = db.columns("PYTORCH_API")
    has_conn = db.has("CONNECTION_IDS") and db.has("TASK") and "connectionId" in cols
    has_chain = db.has("PYTORCH_CALLCHAINS") and "callchainId" in cols
    # device time of the tasks linked to each op (CONNECTION_IDS -> TASK.connectionId)
    # (the small HCCL tasks are left out: the communication op itself is a linked task, as in operator_details.csv)
    dev: dict[int, int] = {}
    if has_conn:
        not_comm = (
            "AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO) "
            if db.has("COMMUNICATION_TASK_INFO")
            else ""
        )
        for rowid, d in db.all(
            "SELECT p.rowid, sum(t.endNs - t.startNs) FROM PYTORCH_API p "
            "JOIN CONNECTION_IDS c ON c.id = p.connectionId JOIN TASK t ON t.connectionId = c.connectionId "
            f"WHERE true {not_comm}GROUP BY p.rowid"
        ):
            dev[int(rowid)] = int(d or 0)
    stacks: dict[int, str] = {}
    if has_chain:
        frames: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for cid, depth, value in db.all(
            "SELECT c.id, c.stackDepth, s.value FROM PYTORCH_CALLCHAINS c JOIN STRING_IDS s ON s.id = c.stack"
        ):
            frames[int(cid)].append((int(depth or 0), str(value)))
        stacks = {k: "\n".join(v for _d, v in sorted(fr)) for k, fr in frames.items()}
        st.has_stacks = bool(stacks)
    seq = "p.sequenceNumber" if "sequenceNumber" in cols else "NULL"
    fwd = "p.fwdThreadId" if "fwdThreadId" in cols else "NULL"
    shape_col, dtype_col = "inputShapes", "inputDtypes"
    if _shapes_swapped(db, cols):
        shape_col, dtype_col = dtype_col, shape_col
        st.notes.append("PYTORCH_API.inputShapes / inputDtypes hold each other's values in this db; read swapped")
    shapes = sql_string(f"p.{shape_col}", "shapes") if shape_col in cols else "NULL AS shapes"
    dtypes = sql_string(f"p.{dtype_col}", "dtypes") if dtype_col in cols else "NULL AS dtypes"
    chain = "p.callchainId" if has_chain else "NULL"
    sql = (
        f"SELECT p.rowid, CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER), p.globalTid, "
        f"{sql_string('p.name', 'name')}, p.type, {seq}, {fwd}, {shapes}, {dtypes}, {chain} "
        f"FROM PYTORCH_API p ORDER BY CAST(p.startNs AS INTEGER)"
    )
    for rows in db.batches(sql):
        rowid, ts, end, gtid, name, typ, seqn, fwdt, shp, dty, chn = columns_of(rows, 11)
        pid = [str(int(g) >> 32) if g is not None else "" for g in gtid]
        tid = [str(int(g) & 0xFFFFFFFF) if g is not None else "" for g in gtid]
        name = [n if n is not None else "" for n in name]
        cat = []
        for t, n in zip(typ, name):
            kind = st.api_types.get(int(t), "") if t is not None else ""
            if kind == "queue":
                cat.append("enqueue" if n.startswith("Enqueue") else "dequeue")
            else:
                cat.append(_PY_CATEGORY.get(kind, kind or None))
        ts = [int(x) if x is not None else 0 for x in ts]
        end = [int(x) if x is not None else t for x, t in zip(end, ts)]
        args = [
            args_json({"Sequence number": s, "Fwd thread id": f, "Input Dims": sh, "Input type": dt})
            for s, f, sh, dt in zip(seqn, fwdt, shp, dty)
        ]
        event_base = st.event_base
        st.slices(pid, tid, name, cat, ts, end, args)
        for p_, t_ in set(zip(pid, tid)):
            st.lane(p_, t_, "Python", f"Thread {t_}", "host")
        idx = [i for i, c in enumerate(cat) if c == "cpu_op"]
        if not idx:
            continue
        if not st.has_shapes and any(shp[i] and any(ch.isdigit() for ch in shp[i]) for i in idx):
            st.has_shapes = True
        stage.write(
            "operators",
            pa.table(
                {
                    "name": pa.array([name[i] for i in idx], pa.string()),
                    "category": pa.array(["cpu_op"] * len(idx), pa.string()),
                    "tid": pa.array([tid[i] for i in idx], pa.string()),
                    "_pid": pa.array([pid[i] for i in idx], pa.string()),
                    "ts_ns": pa.array([ts[i] for i in idx], pa.int64()),
                    "dur_ns": pa.array([end[i] - ts[i] for i in idx], pa.int64()),
                    "input_shapes": pa.array([shp[i] for i in idx], pa.string()),
                    "input_types": pa.array([dty[i] for i in idx], pa.string()),
                    "call_stack": pa.array(
                        [stacks.get(int(chn[i])) if chn[i] is not None else None for i in idx], pa.string()
                    ),
                    "sequence_number": pa.array([seqn[i] for i in idx], pa.int64()),
                    "event_id": pa.array([event_base + i for i in idx], pa.int64()),
                    "_dev": pa.array(
                        [
                            dev.get(int(rowid[i]), 0) if has_conn and not name[i].startswith("ProfilerStep#") else None
                            for i in idx
                        ],
                        pa.int64(),
                    ),
                }
            ),
        )


_DIMS = re.compile(r"[\d,;\s\[\]]+")


def _shapes_swapped(db: Db, cols: set[str]) -> bool:
    """True when PYTORCH_API.inputDtypes holds the dims and inputShapes the type names (seen in the
    2025 samples: trace_view.json's 'Input Dims' text sits in inputDtypes). Decided by content."""
    if not {"inputShapes", "inputDtypes"} <= cols:
        return False
    rows = db.all(
        "SELECT a.value, b.value FROM PYTORCH_API p JOIN STRING_IDS a ON a.id = p.inputShapes "
        "JOIN STRING_IDS b ON b.id = p.inputDtypes LIMIT 5000"
    )
    dims_in_shapes = sum(1 for a, _b in rows if a and _DIMS.fullmatch(str(a)) and any(c.isdigit() for c in str(a)))
    dims_in_dtypes = sum(1 for _a, b in rows if b and _DIMS.fullmatch(str(b)) and any(c.isdigit() for c in str(b)))
    return dims_in_dtypes > dims_in_shapes


def finish_operators(ctx: ReadContext, st: DbExport, staged: Staged) -> None:
    """The staged PYTORCH_API ops with their nesting, step and device times (their own linked tasks'
    and their subtree's), by start."""
    ops = staged.table()
    order = nest_order(ops)
    depth, self_ns = nesting(ops, order)
    dev = ops.column("_dev")
    valid = dev.is_valid().to_numpy(zero_copy_only=False)
    dev_np = pc.fill_null(dev, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    nested = ops.select(["_pid", "tid", "ts_ns", "dur_ns"]).take(pa.array(order))
    total = np.empty(len(order), dtype=np.int64)
    total[order] = subtree_sum(
        nested.column("_pid").to_pylist(),
        nested.column("tid").to_pylist(),
        nested.column("ts_ns").to_numpy(),
        nested.column("dur_ns").to_numpy(),
        dev_np[order],
    )
    rows = pa.table(
        {
            "step": step_of_starts(st.steps, ops.column("ts_ns")),
            **{c: ops.column(c) for c in ("name", "category", "tid", "ts_ns", "dur_ns")},
            "self_ns": self_ns,
            "depth": depth,
            **{c: ops.column(c) for c in ("input_shapes", "input_types", "call_stack", "sequence_number", "event_id")},
            "peer": pa.nulls(ops.num_rows, pa.int32()),  # the db names no p2p call's peer
            "device_self_ns": pa.array(dev_np, pa.int64(), mask=~valid),
            "device_total_ns": pa.array(total, pa.int64(), mask=~valid),
        }
    )
    write_in_order(ctx, "operators", rows, time_order(ops))


def read_cann_api(st: DbExport) -> None:
    sql = (
        f"SELECT startNs, endNs, type, globalTid, connectionId, {sql_string('name', 'name')} "
        "FROM CANN_API ORDER BY startNs"
    )
    for rows in st.db.batches(sql):
        ts, end, typ, gtid, conn, name = columns_of(rows, 6)
        tid = [str(int(g) & 0xFFFFFFFF) if g is not None else "" for g in gtid]
        levels = [st.api_types.get(int(t), str(t)) if t is not None else "" for t in typ]
        names = []
        for lv, n in zip(levels, name):
            prefix = _CANN_PREFIX.get(lv, lv.capitalize() if lv else "")
            names.append(f"{prefix}@{n}" if prefix else str(n))
            st.cann_levels[prefix] += 1
        args = [
            args_json({"Thread Id": int(t) if t else None, "level": lv, "connection_id": c})
            for t, lv, c in zip(tid, levels, conn)
        ]
        st.slices(["CANN"] * len(ts), tid, names, [None] * len(ts), ts, end, args)
        for t_ in set(tid):
            st.lane("CANN", t_, "CANN", f"Thread {t_}", "host")


def _task_type_expr(table_alias: str) -> str:
    return sql_string(f"{table_alias}.taskType", "task_type")


def read_tasks(st: DbExport) -> None:
    db = st.db
    has_compute = db.has("COMPUTE_TASK_INFO")
    cname = (
        "(SELECT s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name "
        "WHERE c.globalTaskId = t.globalTaskId)"
        if has_compute
        else "NULL"
    )
    sql = (
        "SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId, t.modelId, t.connectionId, "
        f"{_task_type_expr('t')}, "
        f"{cname} AS kname FROM TASK t ORDER BY t.startNs"
    )
    for rows in db.batches(sql):
        ts, end, dev, stream, task, model, conn, ttype, kname = columns_of(rows, 9)
        st.devices.update(int(d) for d in set(dev) if d is not None)
        pid = [f"Ascend Hardware {d}" for d in dev]
        tid = [str(s) for s in stream]
        names = [k if k is not None else (tt or "") for k, tt in zip(kname, ttype)]
        args = [
            args_json({"Model Id": m, "Task Type": tt, "Stream Id": s, "Task Id": tk, "connection_id": c})
            for m, tt, s, tk, c in zip(model, ttype, stream, task, conn)
        ]
        st.slices(pid, tid, names, [None] * len(ts), ts, end, args)
        for p_, t_ in set(zip(pid, tid)):
            st.lane(p_, t_, "Ascend Hardware", f"Stream {t_}", "device")


def read_comm_op(st: DbExport, groups: Groups) -> None:
    db = st.db
    cols = db.columns("COMMUNICATION_OP")
    dtypes = enum_names(db, "ENUM_HCCL_DATA_TYPE")

    def opt(c: str) -> str:
        return f"o.{c}" if c in cols else "NULL"

    sql = (
        f"SELECT o.startNs, o.endNs, {sql_string('o.opName', 'name')}, o.groupName, "
        f"{sql_string('o.groupName', 'gname')}, "
        f"{opt('dataType')}, {sql_string('o.algType', 'alg') if 'algType' in cols else 'NULL'}, {opt('count')}, "
        f"{sql_string('o.opType', 'optype') if 'opType' in cols else 'NULL'}, "
        f"{opt('waitNs')}, {opt('connectionId')}, {opt('relay')}, {opt('retry')}, {opt('deviceId')} "
        f"FROM COMMUNICATION_OP o ORDER BY o.startNs"
    )
    rows = db.all(sql)
    pid, tid, names, ts, end, args = [], [], [], [], [], []
    for s, e, name, _gid, gname, dt, alg, count, optype, wait, conn, relay, retry, dev in rows:
        h = group_key(gname)
        if h is not None:
            groups.get(h, group_id=None if h == gname else gname)
        if h is not None and h not in st.group_lane:
            st.group_lane[h] = str(len(st.group_lane))
        dtype = dtypes.get(int(dt), str(dt)) if dt is not None else None
        lane = st.group_lane.get(h or "", "0")
        d = dev if dev is not None else (next(iter(st.devices)) if len(st.devices) == 1 else 0)
        p = f"HCCL {d}"
        pid.append(p)
        tid.append(f"group {lane}")
        st.lane(p, f"group {lane}", "HCCL", f"Group {lane} Communication", "communication")
        names.append(name or "")
        ts.append(fit_ns(s))
        end.append(fit_ns(e))
        args.append(
            args_json(
                {
                    "connection_id": conn,
                    "data_type": dtype,
                    "alg_type": alg,
                    "count": count,
                    "relay": relay,
                    "retry": retry,
                }
            )
        )
        st.comm_ops_raw.append(
            {
                "name": name,
                "ts": ts[-1],
                "dur": end[-1] - ts[-1],  # beyond 64 bits when a time is: saturated and named on writing
                "group": h,
                "group_id": gname,
                "dtype": dtype,
                "count": int(count) if count is not None else None,
                "alg": alg,
                "op_type_raw": optype,
                "wait": int(wait) if wait is not None else None,
            }
        )
    st.slices(pid, tid, names, [None] * len(ts), ts, end, args)


def read_comm_tasks(st: DbExport) -> None:
    db = st.db
    transports = enum_names(db, "ENUM_HCCL_TRANSPORT_TYPE")
    links = enum_names(db, "ENUM_HCCL_LINK_TYPE")
    dtypes = enum_names(db, "ENUM_HCCL_DATA_TYPE")
    sql = (
        f"SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId, {sql_string('c.taskType', 'ttype')}, c.planeId, "
        "c.notifyId, c.srcRank, c.dstRank, c.transportType, c.size, c.dataType, c.linkType, "
        f"{sql_string('c.name', 'opname')} "
        f"FROM COMMUNICATION_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs"
    )
    for rows in db.batches(sql):
        ts, end, dev, stream, task, ttype, plane, notify, src, dst, tr, size, dt, lk, opname = columns_of(rows, 15)
        pid = [f"HCCL {d}" for d in dev]
        tid = [f"plane {p}" for p in plane]
        args = [
            args_json(
                {
                    "notify_id": n,
                    "stream id": s,
                    "task id": tk,
                    "task type": tt,
                    "src rank": sr,
                    "dst rank": ds,
                    "transport type": transports.get(int(t_), None) if t_ is not None else None,
                    "size(Byte)": sz,
                    "data type": dtypes.get(int(d_), None) if d_ is not None else None,
                    "link type": links.get(int(l_), None) if l_ is not None else None,
                    "op name": on,
                }
            )
            for n, s, tk, tt, sr, ds, t_, sz, d_, l_, on in zip(
                notify, stream, task, ttype, src, dst, tr, size, dt, lk, opname
            )
        ]
        st.slices(pid, tid, [t or "" for t in ttype], [None] * len(ts), ts, end, args)
        for p_, t_, pl in set(zip(pid, tid, plane)):
            st.lane(p_, t_, "HCCL", f"Plane {pl}", "communication")


def read_overlap(st: DbExport) -> None:
    rows = st.db.all("SELECT deviceId, startNs, endNs, type FROM OVERLAP_ANALYSIS ORDER BY startNs")
    dev, ts, end, typ = columns_of(rows, 4)
    pid = [f"Overlap Analysis {d}" for d in dev]
    tid = [str(t) for t in typ]
    names = [_OVERLAP.get(int(t), str(t)) if t is not None else "" for t in typ]
    st.slices(pid, tid, names, [None] * len(ts), ts, end, [None] * len(ts))
    for p_, t_, n_ in set(zip(pid, tid, names)):
        st.lane(p_, t_, "Overlap Analysis", n_, "overlap")


def read_freq(ctx: ReadContext, st: DbExport) -> None:
    rows = st.db.all("SELECT timestampNs, freq FROM AICORE_FREQ ORDER BY timestampNs")
    if rows:
        ctx.write(
            "counters",
            {
                "process": ["AI Core Freq"] * len(rows),
                "name": ["AI Core Freq"] * len(rows),
                "series": ["MHz"] * len(rows),
                "ts_ns": [int(r[0]) for r in rows],
                "value": [float(r[1]) if r[1] is not None else None for r in rows],
            },
        )


def write_lanes(ctx: ReadContext, st: DbExport) -> None:
    rows: dict[str, list[Any]] = defaultdict(list)
    for (pid, tid), n in sorted(st.lane_counts.items()):
        process, lane, group = st.lane_names.get((pid, tid), (pid, f"Thread {tid}", "other"))
        rows["pid"].append(pid)
        rows["tid"].append(tid)
        rows["process"].append(process)
        rows["lane"].append(lane)
        rows["lane_group"].append(group)
        rows["n_slices"].append(n)
    if rows:
        ctx.write("lanes", dict(rows))
