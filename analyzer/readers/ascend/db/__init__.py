"""The CANN family's profiler db (SQLite; docs/formats.md §1.13, §2.1, §3.4): torch_npu's
``ascend_pytorch_profiler_{rank}.db``, MindSpore's ``ascend_mindspore_profiler_{rank}.db`` and msprof's
own ``msprof_{ts}.db`` hold the same CANN tables (and the framework ones when the framework wrote
them), read with Python's sqlite3 (read-only, with the rows of a ``-wal``: ``sqlite.read_only``), text
columns resolved through ``STRING_IDS`` / ``ENUM_*``, ``PYTORCH_API.startNs/endNs`` (declared TEXT)
cast to exact integers. Their
communication analysis db (torch_npu's ``analysis.db``, ``communication_analyzer.db``) holds the
``CommAnalyzer*`` tables.

The rows land in the same tables, with the same meaning, as the text export (``output``); after each
``;`` the text-export file that holds the same rows:

- ``PYTORCH_API``, ``CANN_API``, ``TASK`` (+ ``COMPUTE_TASK_INFO`` names), ``COMMUNICATION_OP``,
  ``COMMUNICATION_TASK_INFO`` + ``TASK``, ``OVERLAP_ANALYSIS`` -> ``slices`` / ``lanes``; processes Python, CANN,
  Ascend Hardware, HCCL (Group / Plane lanes), Overlap Analysis; CANN names prefixed ``AscendCL@`` / ``Runtime@`` /
  ``Node@`` / ``Hccl@`` like trace_view.json
- ``PYTORCH_API`` type op (+ ``PYTORCH_CALLCHAINS``) -> ``operators``; self time from nesting; ``device_self_ns`` =
  tasks linked to the op through ``CONNECTION_IDS``; ``device_total_ns`` adds the ops nested in it
- ``STEP_TIME`` -> ``steps``; ProfilerStep ranges
- ``TASK`` + ``COMPUTE_TASK_INFO``, ``COMMUNICATION_OP`` -> ``kernels``; kernel_details.csv rows (compute kernels +
  one HCCL row per communication op)
- ``TASK_PMU_INFO`` -> ``kernel_metrics``; PMU columns, ``*_time`` named ``*_time_ns`` (the db holds ns)
- ``COMMUNICATION_OP`` + analysis.db ``CommAnalyzerTime`` -> ``comm_ops``; communication.json
- analysis.db ``CommAnalyzerBandwidth`` -> ``comm_bandwidth``; transport summary + size-distribution rows
- analysis.db ``CommAnalyzerMatrix`` -> ``comm_links``; communication_matrix.json
- analysis.db ``StepTraceTime`` -> ``step_trace``; step_trace_time.csv (µs in the samples; checked against STEP_TIME)
- ``MEMORY_RECORD``, ``NPU_MEM`` (app), ``NPU_MODULE_MEM`` -> ``memory_samples``; memory_record.csv (its APP rows come
  from NPU_MEM), npu_module_mem.csv
- ``OP_MEMORY`` -> ``operator_memory``; operator_memory.csv
- ``NPU_OP_MEM`` (only when there is no MEMORY_RECORD / OP_MEMORY: msprof's own db) -> ``memory_samples``,
  ``operator_memory``; msprof's memory_record / operator_memory (allocate paired with release)
- ``AICORE_FREQ``, ``NPU_MEM`` -> ``counters``; the AI Core Freq and NPU MEM counter tracks (other system counters are
  not read)
- ``TASK`` + ``COMPUTE_TASK_INFO``, ``CANN_API`` -> ``statistics``; op_statistic / api_statistic, computed here with
  msprof's definitions (the db export has no such files)

Units: the db holds ns, bytes, B/s; analysis.db holds µs (start), ms, MB, GB/s: converted once here.
A table that cannot be read is reported on the file and skipped; a file that is not SQLite is an error.
Wait time of compute kernels (not stored by torch_npu's db) is the gap since the previous task on the
same stream, as msprof defines it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ....errors import InputError
from ....messages import english, problem
from ...base import ReadContext
from ...common.jsonfile import json_value
from ...common.spill import SpillStage
from ..groups import Groups
from .analysis import read_analysis, write_comm_ops
from .kernels import api_statistic, read_kernels, read_pmu
from .memory import read_memory_record, read_module_mem, read_npu_mem, read_npu_op_mem, read_op_memory
from .sqlite import Db, DbExport, read_only
from .timeline import (
    finish_operators,
    read_cann_api,
    read_comm_op,
    read_comm_tasks,
    read_freq,
    read_overlap,
    read_pytorch_api,
    read_steps,
    read_tasks,
    write_lanes,
)


def expected_tables(framework_ops: bool, config: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The tables a profiler db holds when it recorded what its producer's ``config`` asked for:
    the device tables (TASK, COMPUTE_TASK_INFO, CANN_API) unless the NPU activity was off or the
    level was Level_none, PYTORCH_API for torch_npu (``framework_ops``) unless the CPU activity was
    off, SESSION_TIME_INFO always. torch_npu's profiler_info ``config`` is understood; without it
    everything is expected."""
    common = (config or {}).get("common_config") or {}
    activities = [str(a) for a in common.get("activities") or []] if isinstance(common, dict) else []
    level = str(((config or {}).get("experimental_config") or {}).get("_profiler_level") or "")
    npu = not activities or any(a.endswith("NPU") for a in activities)
    cpu = not activities or any(a.endswith("CPU") for a in activities)
    out = ["TASK", "COMPUTE_TASK_INFO", "CANN_API"] if npu and level != "Level_none" else []
    if framework_ops and cpu:
        out.append("PYTORCH_API")
    return (*out, "SESSION_TIME_INFO")


def read_ascend_db(
    ctx: ReadContext,
    main: Path | None,
    analysis: Path | None,
    groups: Groups,
    reader: str,
    expected: str,
    tables: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Read an msprof-style profiler db (torch_npu's ``ascend_pytorch_profiler_{r}.db``, MindSpore's
    ``ascend_mindspore_profiler_{r}.db`` or msprof's own ``msprof_{ts}.db``: the same CANN tables, the
    framework ones when present) and its communication analysis db (``analysis.db`` /
    ``communication_analyzer.db``: the same ``CommAnalyzer*`` tables). Writes every table it finds,
    the communication ops and groups; returns facts for the collection meta. ``tables``: the tables
    this db should hold (``expected_tables``): each one missing is a warning on the file that says
    what is lost, never a silent ``ok`` with fewer rows."""
    st: DbExport | None = None
    extra: dict[str, Any] = {}
    if main is not None:
        with ctx.reading(main, reader) as outcome:
            db = Db(main, expected)
            try:
                if not db.has("STRING_IDS"):
                    raise InputError(str(main), problem("no_string_ids", kind=expected))
                st = DbExport(ctx, db)
                outcome.warn_all(db.problems)
                absent = [t for t in tables if not db.has(t)]
                if absent:
                    holds = "; no ".join(english(f"hold.{t}") for t in absent)
                    key = "db_tables_missing" if len(absent) > 1 else "db_table_missing"
                    outcome.warn(problem(key, tables=", ".join(absent), holds=holds))
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
                problems: list[str] = list(adb.problems)
                times = read_analysis(ctx, adb, st, groups, problems)
                for p in problems:
                    outcome.warn(p)
                outcome.rows = ctx.writer.total_rows - before
            finally:
                adb.close()
    write_comm_ops(ctx, st, groups, times)
    groups.finish()
    rows = groups.rows()
    if rows:
        ctx.write("comm_groups", rows)
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


def _read_main(ctx: ReadContext, st: DbExport, groups: Groups) -> dict[str, Any]:
    db = st.db
    extra: dict[str, Any] = {}
    for table, read in _META_TABLES:
        if db.has(table):
            st.guard(table, lambda read=read: read(ctx, st, extra))
    stage = SpillStage(ctx.scratch_dir())
    if db.has("STEP_TIME"):
        st.guard("STEP_TIME", lambda: read_steps(ctx, st))
    if db.has("PYTORCH_API"):
        st.guard("PYTORCH_API", lambda: read_pytorch_api(ctx, st, stage))
    if db.has("CANN_API"):
        st.guard("CANN_API", lambda: read_cann_api(st))
    if db.has("TASK"):
        st.guard("TASK", lambda: read_tasks(st))
    if db.has("COMMUNICATION_OP"):
        st.guard("COMMUNICATION_OP", lambda: read_comm_op(st, groups))
    if db.has("TASK") and db.has("COMMUNICATION_TASK_INFO"):
        st.guard("COMMUNICATION_TASK_INFO", lambda: read_comm_tasks(st))
    if db.has("OVERLAP_ANALYSIS"):
        st.guard("OVERLAP_ANALYSIS", lambda: read_overlap(st))
    if (db.has("TASK") and db.has("COMPUTE_TASK_INFO")) or st.comm_ops_raw:
        st.guard("COMPUTE_TASK_INFO", lambda: read_kernels(ctx, st))
    if db.has("TASK_PMU_INFO") and st.kernel_of_task is not None:
        st.guard("TASK_PMU_INFO", lambda: read_pmu(ctx, st))
    if db.has("MEMORY_RECORD"):
        st.guard("MEMORY_RECORD", lambda: read_memory_record(ctx, st))
    if db.has("NPU_MEM"):
        st.guard("NPU_MEM", lambda: read_npu_mem(ctx, st))
    if db.has("NPU_MODULE_MEM"):
        st.guard("NPU_MODULE_MEM", lambda: read_module_mem(ctx, st))
    if db.has("OP_MEMORY"):
        st.guard("OP_MEMORY", lambda: read_op_memory(ctx, st))
    if db.has("NPU_OP_MEM") and not db.has("MEMORY_RECORD") and not db.has("OP_MEMORY"):
        st.guard("NPU_OP_MEM", lambda: read_npu_op_mem(ctx, st))
    if db.has("AICORE_FREQ"):
        st.guard("AICORE_FREQ", lambda: read_freq(ctx, st))
    if db.has("CANN_API"):
        st.guard("CANN_API statistics", lambda: api_statistic(ctx, st))
    staged = stage.close()
    if "operators" in staged:
        finish_operators(ctx, st, staged["operators"])
    write_lanes(ctx, st)
    return extra


def _meta_data(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    meta = dict(st.db.all("SELECT name, value FROM META_DATA"))
    if meta.get("SCHEMA_VERSION"):
        ctx.meta.producer_version = f"torch_npu db schema {meta['SCHEMA_VERSION']}"
        extra["db_schema_version"] = meta["SCHEMA_VERSION"]
    if meta.get("ENV_VARIABLES"):
        try:
            extra["env_variables"] = json_value(meta["ENV_VARIABLES"])
        except ValueError:
            extra["env_variables"] = meta["ENV_VARIABLES"]


def _host_info(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    row = st.db.all("SELECT hostName FROM HOST_INFO LIMIT 1")
    if row and row[0][0]:
        ctx.meta.hostname = str(row[0][0])


def _npu_info(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    extra["npu"] = [{"id": i, "name": n} for i, n in st.db.all("SELECT id, name FROM NPU_INFO")]


def _rank_device_map(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    rd = st.db.all("SELECT rankId, deviceId FROM RANK_DEVICE_MAP")
    extra["rank_device_map"] = [{"rank": r, "device": d} for r, d in rd]
    st.devices.update(d for _r, d in rd if d is not None and d >= 0)
    if rd and rd[0][0] is not None and rd[0][0] >= 0 and rd[0][0] != ctx.rank:
        st.problems.append(problem("rank_device_map", found=rd[0][0], rank=ctx.rank))


def _session_time(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    row = st.db.all("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO LIMIT 1")
    if row:
        extra["session_time_ns"] = list(row[0])


def _api_types(ctx: ReadContext, st: DbExport, extra: dict[str, Any]) -> None:
    st.api_types = {int(i): str(n) for i, n in st.db.all("SELECT id, name FROM ENUM_API_TYPE")}


# the db's metadata tables and what reads each (a damaged one is skipped with its reason, as any table)
_META_TABLES: tuple[tuple[str, Callable[[ReadContext, DbExport, dict[str, Any]], None]], ...] = (
    ("META_DATA", _meta_data),
    ("HOST_INFO", _host_info),
    ("NPU_INFO", _npu_info),
    ("RANK_DEVICE_MAP", _rank_device_map),
    ("SESSION_TIME_INFO", _session_time),
    ("ENUM_API_TYPE", _api_types),
)


def rank_device_map(db: Path) -> int | None:
    """The rank a profiler db names in RANK_DEVICE_MAP (discovery's rank source), or None."""
    try:
        with read_only(db) as con:
            row = con.execute("SELECT rankId FROM RANK_DEVICE_MAP WHERE rankId >= 0 LIMIT 1").fetchone()
        return int(row[0]) if row and row[0] is not None else None
    except (sqlite3.Error, OSError, UnicodeDecodeError, TypeError, ValueError):  # a damaged db: read, named later
        return None
