"""torch_npu db export: ``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db`` plus ``analysis.db``
(SQLite; formats.md §1.13). Read with Python's sqlite3 (read-only, immutable), text columns resolved
through ``STRING_IDS`` / ``ENUM_*``, ``PYTORCH_API.startNs/endNs`` (declared TEXT) cast to exact integers.

The rows land in the same tables, with the same meaning, as the text export (torch_npu_text.py):

| db table(s) | table | as in the text export |
|---|---|---|
| ``PYTORCH_API``, ``CANN_API``, ``TASK`` (+ ``COMPUTE_TASK_INFO`` names), ``COMMUNICATION_OP``, ``COMMUNICATION_TASK_INFO`` + ``TASK``, ``OVERLAP_ANALYSIS`` | ``slices`` / ``lanes`` | processes Python, CANN, Ascend Hardware, HCCL (Group / Plane lanes), Overlap Analysis; CANN names prefixed ``AscendCL@`` / ``Runtime@`` / ``Node@`` / ``Hccl@`` like trace_view.json |
| ``PYTORCH_API`` type op (+ ``PYTORCH_CALLCHAINS``) | ``operators`` | self time from nesting; ``device_self_ns`` = tasks linked to the op through ``CONNECTION_IDS``; ``device_total_ns`` adds the ops nested in it |
| ``STEP_TIME`` | ``steps`` | ProfilerStep ranges |
| ``TASK`` + ``COMPUTE_TASK_INFO``, ``COMMUNICATION_OP`` | ``kernels`` | kernel_details.csv rows (compute kernels + one HCCL row per communication op) |
| ``TASK_PMU_INFO`` | ``kernel_metrics`` | PMU columns, ``*_time`` named ``*_time_ns`` (the db holds ns) |
| ``COMMUNICATION_OP`` + analysis.db ``CommAnalyzerTime`` | ``comm_ops`` | communication.json |
| analysis.db ``CommAnalyzerBandwidth`` | ``comm_bandwidth`` | transport summary + size-distribution rows |
| analysis.db ``CommAnalyzerMatrix`` | ``comm_links`` | communication_matrix.json |
| analysis.db ``StepTraceTime`` | ``step_trace`` | step_trace_time.csv (µs in the samples; checked against STEP_TIME) |
| ``MEMORY_RECORD``, ``NPU_MEM`` (app), ``NPU_MODULE_MEM`` | ``memory_samples`` | memory_record.csv (its APP rows come from NPU_MEM), npu_module_mem.csv |
| ``OP_MEMORY`` | ``operator_memory`` | operator_memory.csv |
| ``NPU_OP_MEM`` (only when there is no MEMORY_RECORD / OP_MEMORY: msprof's own db) | ``memory_samples``, ``operator_memory`` | msprof's memory_record / operator_memory (allocate paired with release) |
| ``AICORE_FREQ``, ``NPU_MEM`` | ``counters`` | the AI Core Freq and NPU MEM counter tracks (other system counters are not read) |
| ``TASK`` + ``COMPUTE_TASK_INFO``, ``CANN_API`` | ``statistics`` | op_statistic / api_statistic, computed here with msprof's definitions (the db export has no such files) |

Units: the db holds ns, bytes, B/s; analysis.db holds µs (start), ms, MB, GB/s: converted once here.
A table that cannot be read is reported on the file and skipped; a file that is not SQLite is an error.
Wait time of compute kernels (not stored by torch_npu's db) is the gap since the previous task on the
same stream, as msprof defines it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from ..errors import InputError
from ..units import us_text_to_ns
from .base import ReadContext, register
from .comm_names import P2P_TYPES, normalize_op_type
from .csvfile import text_cell
from .nesting import self_time, subtree_sum
from .scratch import ScratchStage
from .torch_npu_common import (
    NPU_DB_RE,
    OUTPUT_DIR,
    PROFILER_INFO_RE,
    Groups,
    double_hash,
    fill_meta,
    gbps,
    hccl_bytes,
    last_step_started,
    link_rows,
    mb_bytes,
    ms_ns,
    read_producer_files,
    step_from_key,
    switch_sentences,
)

BATCH = 100_000
_CANN_PREFIX = {"acl": "AscendCL", "runtime": "Runtime", "node": "Node", "model": "Model", "hccl": "Hccl"}
_OVERLAP = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
_PY_CATEGORY = {"op": "cpu_op", "trace": "python_function", "mstx": "mstx"}


class Db:
    """A read-only sqlite3 connection with the table list and column names at hand."""

    def __init__(self, path: Path, kind: str):
        self.path = path
        self.kind = kind
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise InputError(str(path), f"cannot read {kind}: {exc.strerror or exc}") from exc
        if size == 0:
            raise InputError(str(path), f"empty file (0 bytes; expected: {kind})")
        with open(path, "rb") as f:
            magic = f.read(16)
        if magic != b"SQLite format 3\x00":
            raise InputError(str(path), f"not a SQLite database (no SQLite header; expected: {kind})")
        try:
            self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            rows = self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.Error as exc:
            raise InputError(str(path), f"corrupt SQLite database ({kind}): {exc}") from exc
        self.tables = {r[0] for r in rows}
        self._cols: dict[str, set[str]] = {}

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        if table not in self._cols:
            try:
                self._cols[table] = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")').fetchall()}
            except sqlite3.Error:
                self._cols[table] = set()
        return self._cols[table]

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, params).fetchall()

    def batches(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[list[tuple[Any, ...]]]:
        cur = self.con.execute(sql, params)
        while True:
            rows = cur.fetchmany(BATCH)
            if not rows:
                return
            yield rows

    def close(self) -> None:
        self.con.close()


def _cols(rows: list[tuple[Any, ...]], n: int) -> list[list[Any]]:
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(n)]


def _js(d: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in d.items() if v is not None}, ensure_ascii=False)


class DbExport:
    """State of one collection while its tables are read."""

    def __init__(self, ctx: ReadContext, db: Db):
        self.ctx = ctx
        self.db = db
        self.event_base = 0
        self.lane_counts: Counter[tuple[str, str]] = Counter()
        self.lane_names: dict[tuple[str, str], tuple[str, str, str]] = {}  # -> (process, lane, group)
        self.steps: list[tuple[int, int, int]] = []
        self.problems: list[str] = []
        self.has_stacks = False
        self.has_shapes = False
        self.devices: set[int] = set()
        self.api_types: dict[int, str] = {}
        self.comm_groups: dict[int, str] = {}  # groupName string id -> hash
        self.group_lane: dict[str, str] = {}
        self.kernel_of_task: tuple[np.ndarray, np.ndarray] | None = None
        self.cann_levels: Counter[str] = Counter()
        self.comm_ops_raw: list[dict[str, Any]] = []
        self.notes: list[str] = []  # facts about the db worth keeping in the collection meta

    # -- helpers -----------------------------------------------------------------------------------

    def step_of(self, ts: int | None) -> int | None:
        """Step of a device task: the last step started at or before it (device work lags the host)."""
        return last_step_started(self.steps, [ts])[0]

    def guard(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except sqlite3.Error as exc:
            self.problems.append(f"{what}: table unreadable ({exc}); skipped")

    def slices(
        self,
        pid: list[str],
        tid: list[str],
        name: list[str],
        cat: list[str | None],
        ts: list[int],
        end: list[int],
        args: list[str | None],
    ) -> None:
        n = len(ts)
        if not n:
            return
        ts_a = np.asarray(ts, dtype=np.int64)
        dur = np.maximum(np.asarray(end, dtype=np.int64) - ts_a, 0)
        self.ctx.write(
            "slices",
            {
                "pid": pid,
                "tid": tid,
                "name": name,
                "category": cat,
                "ts_ns": ts_a,
                "dur_ns": dur,
                "event_id": np.arange(self.event_base, self.event_base + n, dtype=np.int64),
                "args": args,
            },
        )
        self.event_base += n
        self.lane_counts.update(zip(pid, tid))

    def lane(self, pid: str, tid: str, process: str, lane: str, group: str) -> None:
        self.lane_names.setdefault((pid, tid), (process, lane, group))


@register("torch_npu_db")
def read_torch_npu_db(ctx: ReadContext) -> None:
    plan = ctx.plan
    root = plan.root
    out = root / OUTPUT_DIR
    dbs = sorted(p for p in plan.files if p.parent == out and NPU_DB_RE.match(p.name))
    main = next((p for p in dbs if p.name == f"ascend_pytorch_profiler_{ctx.rank}.db"), dbs[0] if dbs else None)
    analysis = out / "analysis.db" if (out / "analysis.db") in plan.files else None
    pf = read_producer_files(ctx, root)
    groups = Groups(ctx.rank, plan.hints, pf.metadata)
    for p in plan.files:
        if (
            p in (main, analysis)
            or p.parent == root
            and (PROFILER_INFO_RE.match(p.name) or p.name == "profiler_metadata.json")
        ):
            continue
        rel = p.relative_to(root).parts
        if rel[0] == "FRAMEWORK" or rel[0].startswith("PROF_"):
            ctx.ignore(p, f"raw profiler data; its parsed form is in {OUTPUT_DIR}/")
        elif rel[0] == "logs":
            ctx.ignore(p, "torch_npu parser log")
        elif NPU_DB_RE.match(p.name):
            ctx.ignore(p, f"profiler db of another rank (rank {ctx.rank} read from {main.name if main else '?'})")
        else:
            ctx.ignore(p, "not a file the db reader ingests")
    if main is None:
        ctx.meta.missing.append("no ascend_pytorch_profiler_{rank}.db in ASCEND_PROFILER_OUTPUT/")
    extra = read_ascend_db(ctx, main, analysis, groups, "ascend_pytorch_profiler.db", "a torch_npu profiler db")
    fill_meta(ctx, pf, extra)
    m = ctx.meta
    if analysis is None:
        m.missing.append("no analysis.db: no wait/transit split, bandwidth or communication matrix")
    switch_sentences(ctx, pf)


def read_ascend_db(
    ctx: ReadContext,
    main: Path | None,
    analysis: Path | None,
    groups: Groups,
    reader: str,
    expected: str,
) -> dict[str, Any]:
    """Read an msprof-style profiler db (torch_npu's ``ascend_pytorch_profiler_{r}.db``, MindSpore's
    ``ascend_mindspore_profiler_{r}.db`` or msprof's own ``msprof_{ts}.db``: the same CANN tables, the
    framework ones when present) and its communication analysis db (``analysis.db`` /
    ``communication_analyzer.db``: the same ``CommAnalyzer*`` tables). Writes every table it finds,
    the communication ops and groups; returns facts for the collection meta."""
    st: DbExport | None = None
    extra: dict[str, Any] = {}
    if main is not None:
        with ctx.reading(main, reader) as outcome:
            db = Db(main, expected)
            try:
                if not db.has("STRING_IDS"):
                    raise InputError(
                        str(main),
                        f"not {expected}: no STRING_IDS table (expected tables STRING_IDS, TASK, "
                        "COMPUTE_TASK_INFO, CANN_API, ...)",
                    )
                st = DbExport(ctx, db)
                extra = _read_main(ctx, st, groups)
                if st.notes:
                    extra["notes"] = st.notes
                for p in st.problems:
                    outcome.warn(p)
                outcome.rows = ctx.writer.total_rows
            finally:
                db.close()
    times: dict[str, list[dict[str, Any]]] = {}
    if analysis is not None:
        with ctx.reading(analysis, analysis.name) as outcome:
            adb = Db(analysis, analysis.name)
            try:
                before = ctx.writer.total_rows
                problems: list[str] = []
                times = _read_analysis(ctx, adb, st, groups, problems)
                for p in problems:
                    outcome.warn(p)
                outcome.rows = ctx.writer.total_rows - before
            finally:
                adb.close()
    _write_comm_ops(ctx, st, groups, times)
    groups.finish()
    rows = groups.rows()
    if rows:
        ctx.write("comm_groups", pa.Table.from_pylist(rows))
    m = ctx.meta
    if st is not None:
        if len(st.devices) == 1:
            m.device_id = next(iter(st.devices))
        if st.has_stacks:
            m.capabilities.add("stacks")
        if st.has_shapes:
            m.capabilities.add("shapes")
        if st.cann_levels:
            m.capabilities.add("cann_api")
            m.extra["cann_api_events"] = dict(st.cann_levels)
        if st.cann_levels.get("Runtime"):
            m.capabilities.add("runtime_api")
    return extra


# ---------------------------------------------------------------------------------------------
# ascend_pytorch_profiler_{rank}.db
# ---------------------------------------------------------------------------------------------


def _read_main(ctx: ReadContext, st: DbExport, groups: Groups) -> dict[str, Any]:
    db = st.db
    extra: dict[str, Any] = {}
    if db.has("META_DATA"):
        meta = dict(db.all("SELECT name, value FROM META_DATA"))
        if meta.get("SCHEMA_VERSION"):
            ctx.meta.producer_version = f"torch_npu db schema {meta['SCHEMA_VERSION']}"
            extra["db_schema_version"] = meta["SCHEMA_VERSION"]
        if meta.get("ENV_VARIABLES"):
            try:
                extra["env_variables"] = json.loads(meta["ENV_VARIABLES"])
            except ValueError:
                extra["env_variables"] = meta["ENV_VARIABLES"]
    if db.has("HOST_INFO"):
        row = db.all("SELECT hostName FROM HOST_INFO LIMIT 1")
        if row and row[0][0]:
            ctx.meta.hostname = str(row[0][0])
    if db.has("NPU_INFO"):
        extra["npu"] = [{"id": i, "name": n} for i, n in db.all("SELECT id, name FROM NPU_INFO")]
    if db.has("RANK_DEVICE_MAP"):
        rd = db.all("SELECT rankId, deviceId FROM RANK_DEVICE_MAP")
        extra["rank_device_map"] = [{"rank": r, "device": d} for r, d in rd]
        st.devices.update(d for _r, d in rd if d is not None and d >= 0)
        if rd and rd[0][0] is not None and rd[0][0] >= 0 and rd[0][0] != ctx.rank:
            st.problems.append(
                f"RANK_DEVICE_MAP says rank {rd[0][0]} but the collection is rank {ctx.rank}; kept {ctx.rank}"
            )
    if db.has("SESSION_TIME_INFO"):
        row = db.all("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO LIMIT 1")
        if row:
            extra["session_time_ns"] = list(row[0])
    if db.has("ENUM_API_TYPE"):
        st.api_types = {int(i): str(n) for i, n in db.all("SELECT id, name FROM ENUM_API_TYPE")}
    stage = ScratchStage(ctx.scratch_dir())
    if db.has("STEP_TIME"):
        st.guard("STEP_TIME", lambda: _steps(ctx, st))
    if db.has("PYTORCH_API"):
        st.guard("PYTORCH_API", lambda: _pytorch_api(ctx, st, stage))
    if db.has("CANN_API"):
        st.guard("CANN_API", lambda: _cann_api(st))
    if db.has("TASK"):
        st.guard("TASK", lambda: _tasks(st))
    if db.has("COMMUNICATION_OP"):
        st.guard("COMMUNICATION_OP", lambda: _comm_op(st, groups))
    if db.has("TASK") and db.has("COMMUNICATION_TASK_INFO"):
        st.guard("COMMUNICATION_TASK_INFO", lambda: _comm_tasks(st))
    if db.has("OVERLAP_ANALYSIS"):
        st.guard("OVERLAP_ANALYSIS", lambda: _overlap(st))
    if (db.has("TASK") and db.has("COMPUTE_TASK_INFO")) or st.comm_ops_raw:
        st.guard("COMPUTE_TASK_INFO", lambda: _kernels(ctx, st))
    if db.has("TASK_PMU_INFO") and st.kernel_of_task is not None:
        st.guard("TASK_PMU_INFO", lambda: _pmu(ctx, st))
    if db.has("MEMORY_RECORD"):
        st.guard("MEMORY_RECORD", lambda: _memory_record(ctx, st))
    if db.has("NPU_MEM"):
        st.guard("NPU_MEM", lambda: _npu_mem(ctx, st))
    if db.has("NPU_MODULE_MEM"):
        st.guard("NPU_MODULE_MEM", lambda: _module_mem(ctx, st))
    if db.has("OP_MEMORY"):
        st.guard("OP_MEMORY", lambda: _op_memory(ctx, st))
    if db.has("NPU_OP_MEM") and not db.has("MEMORY_RECORD") and not db.has("OP_MEMORY"):
        st.guard("NPU_OP_MEM", lambda: _npu_op_mem(ctx, st))
    if db.has("AICORE_FREQ"):
        st.guard("AICORE_FREQ", lambda: _freq(ctx, st))
    if db.has("CANN_API"):
        st.guard("CANN_API statistics", lambda: _api_statistic(ctx, st))
    staged = stage.close()
    if "operators" in staged:
        _finish_operators(ctx, st, staged["operators"])
    _write_lanes(ctx, st)
    return extra


def _str(col: str, alias: str) -> str:
    """SQL for a STRING_IDS lookup of ``col``."""
    return f"(SELECT value FROM STRING_IDS WHERE id = {col}) AS {alias}"


def _steps(ctx: ReadContext, st: DbExport) -> None:
    rows = st.db.all("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs")
    st.steps = [(int(i), int(s), int(e)) for i, s, e in rows if i is not None and s is not None and e is not None]
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


def _pytorch_api(ctx: ReadContext, st: DbExport, stage: ScratchStage) -> None:
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
    shapes = _str(f"p.{shape_col}", "shapes") if shape_col in cols else "NULL AS shapes"
    dtypes = _str(f"p.{dtype_col}", "dtypes") if dtype_col in cols else "NULL AS dtypes"
    chain = "p.callchainId" if has_chain else "NULL"
    sql = (
        f"SELECT p.rowid, CAST(p.startNs AS INTEGER), CAST(p.endNs AS INTEGER), p.globalTid, "
        f"{_str('p.name', 'name')}, p.type, {seq}, {fwd}, {shapes}, {dtypes}, {chain} "
        f"FROM PYTORCH_API p ORDER BY CAST(p.startNs AS INTEGER)"
    )
    for rows in db.batches(sql):
        rowid, ts, end, gtid, name, typ, seqn, fwdt, shp, dty, chn = _cols(rows, 11)
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
            _js({"Sequence number": s, "Fwd thread id": f, "Input Dims": sh, "Input type": dt})
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
                    "dur_ns": pa.array([max(end[i] - ts[i], 0) for i in idx], pa.int64()),
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


def _finish_operators(ctx: ReadContext, st: DbExport, path: str) -> None:
    con = duckdb.connect(":memory:")
    try:
        p = path.replace("'", "''")
        ops = con.sql(
            f"SELECT * FROM read_parquet('{p}') ORDER BY _pid, tid, ts_ns, dur_ns DESC, event_id"
        ).to_arrow_table()
        nest = self_time(ops)
        dev = ops.column("_dev")
        valid = pc.is_valid(dev).to_numpy(zero_copy_only=False)
        dev_np = dev.fill_null(0).to_numpy(zero_copy_only=False)
        total = subtree_sum(
            ops.column("_pid").to_pylist(),
            ops.column("tid").to_pylist(),
            ops.column("ts_ns").to_numpy(zero_copy_only=False),
            ops.column("dur_ns").to_numpy(zero_copy_only=False),
            dev_np,
        )
        extra = pa.table(
            {
                "event_id": nest.column("event_id"),
                "depth": nest.column("depth"),
                "self_ns": nest.column("self_ns"),
                "device_self_ns": pa.array(dev_np, pa.int64(), mask=~valid),
                "device_total_ns": pa.array(total, pa.int64(), mask=~valid),
            }
        )
        con.register("ops", ops)
        con.register("x", extra)
        con.register(
            "steps",
            pa.table(
                {
                    "step": pa.array([s[0] for s in st.steps], pa.int32()),
                    "start_ns": pa.array([s[1] for s in st.steps], pa.int64()),
                    "end_ns": pa.array([s[2] for s in st.steps], pa.int64()),
                }
            ),
        )
        names = schema.FACTS["operators"].column_names[3:]
        rep = {
            "step": "CASE WHEN o.ts_ns < s.end_ns THEN s.step END",
            "self_ns": "x.self_ns",
            "depth": "x.depth",
            "device_self_ns": "x.device_self_ns",
            "device_total_ns": "x.device_total_ns",
        }
        sel = ", ".join(f'{rep[c]} AS "{c}"' if c in rep else f'o."{c}"' for c in names)
        rdr = con.sql(
            f"SELECT {sel} FROM ops o JOIN x USING (event_id) ASOF LEFT JOIN steps s ON o.ts_ns >= s.start_ns "
            f"ORDER BY o.ts_ns, o.event_id"
        ).to_arrow_reader(200_000)
        for batch in rdr:
            ctx.write("operators", batch)
    finally:
        con.close()


def _cann_api(st: DbExport) -> None:
    sql = f"SELECT startNs, endNs, type, globalTid, connectionId, {_str('name', 'name')} FROM CANN_API ORDER BY startNs"
    for rows in st.db.batches(sql):
        ts, end, typ, gtid, conn, name = _cols(rows, 6)
        tid = [str(int(g) & 0xFFFFFFFF) if g is not None else "" for g in gtid]
        levels = [st.api_types.get(int(t), str(t)) if t is not None else "" for t in typ]
        names = []
        for lv, n in zip(levels, name):
            prefix = _CANN_PREFIX.get(lv, lv.capitalize() if lv else "")
            names.append(f"{prefix}@{n}" if prefix else str(n))
            st.cann_levels[prefix] += 1
        args = [
            _js({"Thread Id": int(t) if t else None, "level": lv, "connection_id": c})
            for t, lv, c in zip(tid, levels, conn)
        ]
        st.slices(["CANN"] * len(ts), tid, names, [None] * len(ts), ts, end, args)
        for t_ in set(tid):
            st.lane("CANN", t_, "CANN", f"Thread {t_}", "host")


def _task_type_expr(table_alias: str) -> str:
    return _str(f"{table_alias}.taskType", "task_type")


def _tasks(st: DbExport) -> None:
    db = st.db
    has_compute = db.has("COMPUTE_TASK_INFO")
    cname = (
        "(SELECT s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name WHERE c.globalTaskId = t.globalTaskId)"
        if has_compute
        else "NULL"
    )
    sql = (
        f"SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId, t.modelId, t.connectionId, {_task_type_expr('t')}, "
        f"{cname} AS kname FROM TASK t ORDER BY t.startNs"
    )
    for rows in db.batches(sql):
        ts, end, dev, stream, task, model, conn, ttype, kname = _cols(rows, 9)
        st.devices.update(int(d) for d in set(dev) if d is not None)
        pid = [f"Ascend Hardware {d}" for d in dev]
        tid = [str(s) for s in stream]
        names = [k if k is not None else (tt or "") for k, tt in zip(kname, ttype)]
        args = [
            _js({"Model Id": m, "Task Type": tt, "Stream Id": s, "Task Id": tk, "connection_id": c})
            for m, tt, s, tk, c in zip(model, ttype, stream, task, conn)
        ]
        st.slices(pid, tid, names, [None] * len(ts), ts, end, args)
        for p_, t_ in set(zip(pid, tid)):
            st.lane(p_, t_, "Ascend Hardware", f"Stream {t_}", "device")


def _enum(db: Db, table: str) -> dict[int, str]:
    if not db.has(table):
        return {}
    return {int(i): str(n) for i, n in db.all(f"SELECT id, name FROM {table}")}


def _comm_op(st: DbExport, groups: Groups) -> None:
    db = st.db
    cols = db.columns("COMMUNICATION_OP")
    dtypes = _enum(db, "ENUM_HCCL_DATA_TYPE")
    opt = lambda c: f"o.{c}" if c in cols else "NULL"  # noqa: E731
    sql = (
        f"SELECT o.startNs, o.endNs, {_str('o.opName', 'name')}, o.groupName, {_str('o.groupName', 'gname')}, "
        f"{opt('dataType')}, {_str('o.algType', 'alg') if 'algType' in cols else 'NULL'}, {opt('count')}, "
        f"{_str('o.opType', 'optype') if 'opType' in cols else 'NULL'}, "
        f"{opt('waitNs')}, {opt('connectionId')}, {opt('relay')}, {opt('retry')}, {opt('deviceId')} "
        f"FROM COMMUNICATION_OP o ORDER BY o.startNs"
    )
    rows = db.all(sql)
    pid, tid, names, ts, end, args = [], [], [], [], [], []
    for s, e, name, gid, gname, dt, alg, count, optype, wait, conn, relay, retry, dev in rows:
        h = double_hash(gname) if gname else None
        if gname:
            groups.get(h, group_id=gname)
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
        ts.append(int(s))
        end.append(int(e))
        args.append(
            _js(
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
                "ts": int(s),
                "dur": int(e) - int(s),
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


def _comm_tasks(st: DbExport) -> None:
    db = st.db
    transports = _enum(db, "ENUM_HCCL_TRANSPORT_TYPE")
    links = _enum(db, "ENUM_HCCL_LINK_TYPE")
    dtypes = _enum(db, "ENUM_HCCL_DATA_TYPE")
    sql = (
        f"SELECT t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId, {_str('c.taskType', 'ttype')}, c.planeId, "
        f"c.notifyId, c.srcRank, c.dstRank, c.transportType, c.size, c.dataType, c.linkType, {_str('c.name', 'opname')} "
        f"FROM COMMUNICATION_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId ORDER BY t.startNs"
    )
    for rows in db.batches(sql):
        ts, end, dev, stream, task, ttype, plane, notify, src, dst, tr, size, dt, lk, opname = _cols(rows, 15)
        pid = [f"HCCL {d}" for d in dev]
        tid = [f"plane {p}" for p in plane]
        args = [
            _js(
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


def _overlap(st: DbExport) -> None:
    rows = st.db.all("SELECT deviceId, startNs, endNs, type FROM OVERLAP_ANALYSIS ORDER BY startNs")
    dev, ts, end, typ = _cols(rows, 4)
    pid = [f"Overlap Analysis {d}" for d in dev]
    tid = [str(t) for t in typ]
    names = [_OVERLAP.get(int(t), str(t)) if t is not None else "" for t in typ]
    st.slices(pid, tid, names, [None] * len(ts), ts, end, [None] * len(ts))
    for p_, t_, n_ in set(zip(pid, tid, names)):
        st.lane(p_, t_, "Overlap Analysis", n_, "overlap")


def _kernels(ctx: ReadContext, st: DbExport) -> None:
    db = st.db
    ccols = db.columns("COMPUTE_TASK_INFO")
    opt = lambda c, alias: f"c.{c}" if c in ccols else f"NULL AS {alias}"  # noqa: E731
    ostr = lambda c, alias: _str(f"c.{c}", alias) if c in ccols else f"NULL AS {alias}"  # noqa: E731
    block = "c.blockNum" if "blockNum" in ccols else opt("blockDim", "block")
    mix = "c.mixBlockNum" if "mixBlockNum" in ccols else opt("mixBlockDim", "mix")
    # wait time: gap since the previous task on the same stream (msprof's definition)
    sql = f"""
        WITH w AS (
          SELECT globalTaskId, startNs - lag(endNs) OVER (PARTITION BY deviceId, streamId ORDER BY startNs) AS gap
          FROM TASK)
        SELECT t.globalTaskId, t.startNs, t.endNs, t.deviceId, t.streamId, t.taskId,
               {_str("c.name", "name")}, {ostr("opType", "optype")}, {ostr("taskType", "ttype")}, {block}, {mix},
               {ostr("opState", "state")}, {ostr("inputShapes", "ish")}, {ostr("inputDataTypes", "idt")},
               {ostr("inputFormats", "ifm")}, {ostr("outputShapes", "osh")}, {ostr("outputDataTypes", "odt")},
               {ostr("outputFormats", "ofm")}, w.gap
        FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId LEFT JOIN w ON w.globalTaskId = t.globalTaskId
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
                "op_type": _t(optype),
                "core_type": _t(ttype),
                "is_communication": False,
                "device_id": dev,
                "stream_id": stream,
                "task_id": task,
                "ts_ns": int(s),
                "dur_ns": max(int(e) - int(s), 0),
                "wait_ns": max(int(gap), 0) if gap is not None else 0,
                "block_dim": blk,
                "mix_block_dim": mixb,
                "op_state": _t(state),
                "input_shapes": _t(ish),
                "input_dtypes": _t(idt),
                "input_formats": _t(ifm),
                "output_shapes": _t(osh),
                "output_dtypes": _t(odt),
                "output_formats": _t(ofm),
            }
        else:
            row = {
                "name": r["name"],
                "op_type": _t(r["op_type_raw"]),
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


def _t(v: Any) -> str | None:
    """A db string as the text export would give it: N/A and empty as NULL."""
    return text_cell(str(v)) if v is not None else None


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


def _api_statistic(ctx: ReadContext, st: DbExport) -> None:
    """api_statistic.csv's numbers from CANN_API: per (level, API name) time, count, avg, min, max, variance."""
    rows = st.db.all(
        f"SELECT type, {_str('name', 'name')}, count(*), sum(endNs - startNs), min(endNs - startNs), "
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


def pmu_metric_name(name: str) -> str:
    """TASK_PMU_INFO metric name -> kernel_metrics name with its unit (db times are ns, bandwidths B/s)."""
    if name.endswith("_time"):
        return f"{name}_ns"
    if name.endswith("_bw"):
        return f"{name}_bytes_per_s"
    return name


def _pmu(ctx: ReadContext, st: DbExport) -> None:
    assert st.kernel_of_task is not None
    tasks, kids = st.kernel_of_task
    names = {
        int(i): pmu_metric_name(str(v))
        for i, v in st.db.all("SELECT DISTINCT p.name, s.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name")
    }
    for rows in st.db.batches("SELECT globalTaskId, name, value FROM TASK_PMU_INFO"):
        gid, nm, val = _cols(rows, 3)
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


def _memory_record(ctx: ReadContext, st: DbExport) -> None:
    for rows in st.db.batches(
        f"SELECT timestamp, {_str('component', 'comp')}, deviceId, totalAllocated, totalReserved, totalActive, streamPtr "
        f"FROM MEMORY_RECORD ORDER BY timestamp"
    ):
        ts, comp, dev, alloc, res, act, ptr = _cols(rows, 7)
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
        f"SELECT timestampNs, {_str('type', 'kind')}, ddr, hbm, deviceId FROM NPU_MEM ORDER BY timestampNs"
    )


def _npu_mem(ctx: ReadContext, st: DbExport) -> None:
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


def _module_mem(ctx: ReadContext, st: DbExport) -> None:
    modules = _enum(st.db, "ENUM_MODULE")
    for rows in st.db.batches(
        "SELECT timestampNs, moduleId, totalReserved, deviceId FROM NPU_MODULE_MEM ORDER BY timestampNs"
    ):
        ts, mod, res, dev = _cols(rows, 4)
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


def _op_memory(ctx: ReadContext, st: DbExport) -> None:
    for rows in st.db.batches(
        f"SELECT {_str('name', 'name')}, size, allocationTime, releaseTime, activeReleaseTime, duration, activeDuration, "
        f"allocationTotalAllocated, allocationTotalReserved, allocationTotalActive, releaseTotalAllocated, "
        f"releaseTotalReserved, releaseTotalActive, streamPtr, deviceId FROM OP_MEMORY ORDER BY allocationTime"
    ):
        c = _cols(rows, 15)
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


def _npu_op_mem(ctx: ReadContext, st: DbExport) -> None:
    """CANN operator memory events, read when the db has no MEMORY_RECORD / OP_MEMORY (msprof's own db:
    its text export derives memory_record and operator_memory from this table, and so do we; in
    torch_npu's db these rows are already the GE rows of MEMORY_RECORD). Allocator totals over time go
    to ``memory_samples``; each allocate event paired with the next release of the same (operator,
    address, component) to ``operator_memory`` (a block still held at the end has no release; a
    release with no allocation before it is not a block)."""
    kinds = {k: v.lower() for k, v in _enum(st.db, "ENUM_MEMORY").items()}
    rows = st.db.all(
        f"SELECT {_str('operatorName', 'name')}, addr, type, size, timestampNs, totalAllocate, totalReserve, "
        f"{_str('component', 'comp')}, deviceId FROM NPU_OP_MEM ORDER BY timestampNs, rowid"
    )
    if not rows:
        return
    dev = lambda d: f"NPU:{d}" if d is not None else None  # noqa: E731
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


def _freq(ctx: ReadContext, st: DbExport) -> None:
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


def _write_lanes(ctx: ReadContext, st: DbExport) -> None:
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


# ---------------------------------------------------------------------------------------------
# analysis.db and communication
# ---------------------------------------------------------------------------------------------


def _read_analysis(
    ctx: ReadContext, adb: Db, st: DbExport | None, groups: Groups, problems: list[str]
) -> dict[str, list[dict[str, Any]]]:
    times: dict[str, list[dict[str, Any]]] = defaultdict(list)
    known = {"CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix", "StepTraceTime"}
    if not adb.tables & known:
        raise InputError(str(adb.path), f"not a torch_npu analysis.db: none of the tables {', '.join(sorted(known))}")

    def guard(name: str, fn: Callable[[], None]) -> None:
        if not adb.has(name):
            return
        try:
            fn()
        except sqlite3.Error as exc:
            problems.append(f"{name}: table unreadable ({exc}); skipped")

    def comm_time() -> None:
        for name, g, start, el, tr, wt, sy, idle, step, typ in adb.all(
            "SELECT hccl_op_name, group_name, start_timestamp, elapse_time, transit_time, wait_time, "
            "synchronization_time, idle_time, step, type FROM CommAnalyzerTime"
        ):
            if name is None or str(name) == "Total Op Info":
                continue
            times[str(name)].append(
                {
                    "group": str(g) if g is not None else None,
                    "step": step_from_key(str(step)) if step else None,
                    "is_p2p": str(typ or "").lower() == "p2p",
                    "elapse": ms_ns(el),
                    "transit": ms_ns(tr),
                    "wait": ms_ns(wt),
                    "sync": ms_ns(sy),
                    "idle": ms_ns(idle),
                    "start_us": start,
                }
            )
            if g is not None:
                groups.get(str(g))

    def bandwidth() -> None:
        rows = adb.all(
            "SELECT step, type, hccl_op_name, group_name, transport_type, transit_size, transit_time, bandwidth, "
            "large_packet_ratio, package_size, count, total_duration FROM CommAnalyzerBandwidth"
        )
        out: dict[str, list[Any]] = defaultdict(list)
        seen: set[tuple[Any, ...]] = set()

        def add(
            step: Any, op: Any, g: Any, tr: Any, size: Any, tm: Any, bw: Any, lpr: Any, pkt: Any, cnt: Any, dur: Any
        ) -> None:
            out["step"].append(step_from_key(str(step)) if step else None)
            out["op_name"].append(op)
            out["group_name"].append(str(g) if g is not None else None)
            out["transport"].append(tr)
            out["bytes"].append(mb_bytes(size))
            out["transit_ns"].append(ms_ns(tm))
            out["bandwidth_bytes_per_s"].append(gbps(bw))
            out["large_packet_ratio"].append(float(lpr) if lpr is not None else None)
            out["packet_size_bytes"].append(pkt)
            out["packet_count"].append(cnt)
            out["packet_transit_ns"].append(dur)

        for step, _typ, op, g, tr, size, tm, bw, lpr, pkt, cnt, dur in rows:
            if op is None or str(op) == "Total Op Info" or (not size and not tm):
                continue
            key = (step, op, g, tr)
            if key not in seen:  # the transport summary (repeated on each size bucket in the db)
                seen.add(key)
                add(step, op, g, tr, size, tm, bw, lpr, None, None, None)
            if pkt or cnt:
                add(
                    step, op, g, tr, size, tm, bw, lpr, mb_bytes(pkt), int(cnt) if cnt is not None else None, ms_ns(dur)
                )
        if out:
            ctx.write("comm_bandwidth", dict(out))

    def matrix() -> None:
        entries = []
        for op_key, g, src, dst, tr, size, tm, bw, step, typ, op_name in adb.all(
            "SELECT hccl_op_name, group_name, src_rank, dst_rank, transport_type, transit_size, transit_time, "
            "bandwidth, step, type, op_name FROM CommAnalyzerMatrix"
        ):
            if op_key is None or str(op_key) == "Total Op Info":
                continue
            entries.append(
                {
                    "step": step_from_key(str(step)) if step else None,
                    "op_key": str(op_key),
                    "op_name": op_name or None,
                    "group": str(g) if g is not None else None,
                    "is_p2p": str(typ or "").lower() == "p2p",
                    "src": _int(src),
                    "dst": _int(dst),
                    "transport": tr,
                    "size_mb": size,
                    "time_ms": tm,
                    "bw_gbps": bw,
                }
            )
        rows = link_rows(entries, groups)
        if rows:
            ctx.write("comm_links", pa.Table.from_pylist(rows))

    def step_trace() -> None:
        cols = adb.columns("StepTraceTime")
        names = [
            "step",
            "computing",
            "communication_not_overlapped",
            "overlapped",
            "communication",
            "free",
            "stage",
            "bubble",
            "communication_not_overlapped_and_exclude_receive",
            "preparing",
        ]
        sel = ", ".join(c if c in cols else "NULL" for c in names)
        rows = adb.all(f"SELECT {sel} FROM StepTraceTime")
        if not rows:
            return
        factor = _step_trace_unit(rows, st.steps if st is not None else [])
        out: dict[str, list[Any]] = defaultdict(list)
        targets = [
            "computing_ns",
            "comm_not_overlapped_ns",
            "overlapped_ns",
            "communication_ns",
            "free_ns",
            "stage_ns",
            "bubble_ns",
            "comm_not_overlapped_excl_receive_ns",
            "preparing_ns",
        ]
        for r in rows:
            out["step"].append(_int(r[0]))
            for col, v in zip(targets, r[1:]):
                out[col].append(round(float(v) * factor) if v is not None else None)
        ctx.write("step_trace", dict(out))

    guard("CommAnalyzerTime", comm_time)
    guard("CommAnalyzerBandwidth", bandwidth)
    guard("CommAnalyzerMatrix", matrix)
    guard("StepTraceTime", step_trace)
    return times


def _int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(str(v).strip().removeprefix("step"))
    except ValueError:
        return None


def _step_trace_unit(rows: list[tuple[Any, ...]], steps: list[tuple[int, int, int]]) -> float:
    """ns per unit of StepTraceTime: µs in the samples (same numbers as step_trace_time.csv), ms per the
    docs. Decided by comparing 'stage' (about the step time) with STEP_TIME; µs when in doubt."""
    dur = {s: e - b for s, b, e in steps}
    for r in rows:
        step, stage = _int(r[0]), r[6]
        if step in dur and stage:
            us_err = abs(float(stage) * 1e3 - dur[step])
            ms_err = abs(float(stage) * 1e6 - dur[step])
            return 1e6 if ms_err < us_err else 1e3
    return 1e3


def _write_comm_ops(
    ctx: ReadContext, st: DbExport | None, groups: Groups, times: dict[str, list[dict[str, Any]]]
) -> None:
    """COMMUNICATION_OP rows with the wait/transit split of CommAnalyzerTime; CommAnalyzerTime alone
    (float µs start) when the profiler db gave no communication op."""
    groups.finish()
    rows = []
    taken: Counter[str] = Counter()
    raw = st.comm_ops_raw if st is not None else []
    if not raw:
        for name, ts_list in times.items():
            for t in ts_list:
                start = t["start_us"]
                raw.append(
                    {
                        "name": name,
                        "ts": us_text_to_ns(repr(float(start))) if start is not None else None,
                        "dur": t["elapse"],
                        "group": t["group"],
                        "dtype": None,
                        "count": None,
                        "alg": None,
                        "from_analysis": True,
                    }
                )
        raw.sort(key=lambda c: (c["ts"] is None, c["ts"] or 0))
    for c in raw:
        name = c["name"] or ""
        cands = times.get(name) or []
        t = cands[taken[name]] if taken[name] < len(cands) else None
        taken[name] += 1
        op_type = normalize_op_type(name)
        h = c["group"] or (t["group"] if t else None)
        g = groups.get(h) if h else None
        step = t["step"] if t and t["step"] is not None else (st.step_of(c["ts"]) if st is not None else None)
        rows.append(
            {
                "step": step,
                "name": name,
                "op_type": op_type,
                "group_name": h,
                "group_ranks": g.global_ranks if g else None,
                "is_p2p": (t["is_p2p"] if t else False) or op_type in P2P_TYPES,
                "ts_ns": c["ts"],
                "dur_ns": c["dur"],
                "transit_ns": t["transit"] if t else None,
                "wait_ns": t["wait"] if t else None,
                "sync_ns": t["sync"] if t else None,
                "idle_ns": t["idle"] if t else None,
                "bytes": hccl_bytes(c["dtype"], c["count"]),
                "dtype": c["dtype"],
                "count": c["count"],
                "alg_type": c["alg"],
                "source": "analysis.db"
                if c.get("from_analysis")
                else "COMMUNICATION_OP" + ("+analysis.db" if t else ""),
            }
        )
    if rows:
        ctx.write("comm_ops", pa.Table.from_pylist(rows))
