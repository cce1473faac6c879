"""MindSpore ≥ 2.3 output: a ``*_ascend_ms`` folder (docs/formats.md §2.1, §2.2).

``ASCEND_PROFILER_OUTPUT/`` is the torch_npu layout with the differences of docs/formats.md §2.1, so its
files are read by the CANN family's output-folder reader (``ascend.output``) with MindSpore's
parameters: framework ops live in the
``MindSpore`` (Ascend) and ``CPU OP`` (host CPU) processes of ``trace_view.json`` without a
``cpu_op`` category, ``Scope Layer`` holds the cell hierarchy, ``kernel_details.csv`` says
``Step ID``, ``profiler_info_{rank}.json`` has its own schema (``profiler_parameters``,
``ms_version``, ``cann_version``).

Also read, by this module:

- ``FRAMEWORK/cpu_*`` host-CPU text files (see ``host``): CPU memory curve and op statistics;
  the op timestamps when the job died before ``analyse()`` wrote a trace;
- the db export (``export_type=db``: ``ascend_mindspore_profiler_{rank}.db`` + ``communication_analyzer.db``)
  through the CANN profiler db reader (``ascend.db``; msprof's CANN tables, framework ops when present);
- a ``PROF_*/mindstudio_profiler_output/`` left by an unfinished parse (read as msprof's export);
- the ≤ 2.2 legacy flat files of a ``profiler/`` folder (``legacy``, its own reader ``mindspore_legacy``);
- the dynamic-profiling window folder ``rank{r}_start{a}_stop{b}/`` around the collection.

A folder with only ``logs/`` (the job died before the profiler stopped) or only binary raw data is
recorded as ``unparsed`` with the reason and, when it can help, how to parse it offline.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...messages import english, problem
from ..ascend.db import expected_tables, read_ascend_db
from ..ascend.groups import Groups
from ..ascend.msprof_export import ExportState, export_files, read_export
from ..ascend.names import COMM_ANALYZER_DB, EXPORT_DIR, MINDSPORE_DB_RE, OUTPUT_DIR, PROFILER_INFO_RE, TEXT_MARKERS
from ..ascend.output import read_output_folder
from ..ascend.prof import prof_info_rank
from ..base import ReadContext, register
from ..common.cells import int_or_none
from ..common.jsonfile import load_json, peek_json
from . import legacy  # noqa: F401 - registers the mindspore_legacy reader
from .host import (
    CPU_FILE_RE,
    CPU_PROCESS,
    collective_type,
    cpu_files,
    read_memory_record,
    read_op_detail_info,
    read_op_type_info,
    write_cpu_comm_ops,
    write_cpu_ops_from_timestamps,
)

RANK_DIR_RE = re.compile(r"^rank-(\d+)_")  # MindSpore 2.3/2.4: profiler/rank-{rank}_{ts}_ascend_ms
WINDOW_DIR_RE = re.compile(r"^rank(\d+)_start(\d+)_stop(\d+)$")  # DynamicProfilerMonitor window
MS_OP_PROCESSES = frozenset({"MindSpore", CPU_PROCESS})
OFFLINE_HINT = english("missing.hint.mindspore_offline")


def resolve_rank(d: Path) -> tuple[int | None, str | None]:
    """Rank of a ``*_ascend_ms`` folder (docs/formats.md §7.5, MindSpore): ``profiler_info_{r}.json``
    name -> ``rank-{r}_`` folder name (2.3/2.4) -> ``ascend_mindspore_profiler_{r}.db`` name -> dynamic
    window ``rank{r}_start{a}_stop{b}`` ->
    the ``_{r}`` suffix of the FRAMEWORK host-CPU files -> ``ms_profiler_info.rank_id`` ->
    ``PROF_*/device_*/info.json.*`` ``rank_id`` (not -1)."""
    try:
        entries = sorted(d.iterdir())
    except OSError:
        entries = []
    infos = []
    for f in entries:
        m = PROFILER_INFO_RE.match(f.name)
        if m and m.group(1) is not None:
            return int(m.group(1)), "profiler_info"
        if m:
            infos.append(f)
    m = RANK_DIR_RE.match(d.name)
    if m:
        return int(m.group(1)), "rank_dir_name"
    out = d / OUTPUT_DIR
    db_ranks = {
        int(m.group(1))
        for m in (MINDSPORE_DB_RE.match(p.name) for p in (out.iterdir() if out.is_dir() else ()))
        if m and m.group(1)
    }
    if len(db_ranks) == 1:
        return db_ranks.pop(), "db_name"
    m = WINDOW_DIR_RE.match(d.parent.name)
    if m:
        return int(m.group(1)), "window_dir"
    fw = d / "FRAMEWORK"
    if fw.is_dir():
        ranks = {int(m.group("rank")) for m in (CPU_FILE_RE.match(p.name) for p in fw.iterdir()) if m}
        if len(ranks) == 1:
            return ranks.pop(), "framework_suffix"
    for f in infos:
        info = peek_json(f)
        if isinstance(info, dict):
            r = (
                int_or_none((info.get("ms_profiler_info") or {}).get("rank_id"))
                if isinstance(info.get("ms_profiler_info"), dict)
                else None
            )
            if r is None:
                r = int_or_none(info.get("rank_id"))
            if r is not None and r >= 0:
                return r, "profiler_info"
    r = prof_info_rank(d)
    if r is not None:
        return r, "PROF_info"
    return None, None


# ---------------------------------------------------------------------------------------------
# the reader
# ---------------------------------------------------------------------------------------------


def _read_profiler_info(ctx: ReadContext, root: Path) -> dict[str, Any] | None:
    info: dict[str, Any] | None = None
    for f in sorted(root.iterdir()) if root.is_dir() else []:
        if not f.is_file():
            continue
        if PROFILER_INFO_RE.match(f.name):
            with ctx.reading(f, "mindspore profiler_info.json") as oc:
                data = load_json(f, "profiler_info", obj=True)
                info = info or data
                msi = data.get("ms_profiler_info") if isinstance(data.get("ms_profiler_info"), dict) else {}
                rid = int_or_none(msi.get("rank_id")) if msi else int_or_none(data.get("rank_id"))
                if rid is not None and rid >= 0 and rid != ctx.rank and ctx.plan.rank_source in ("sidecar", "rank_dir"):
                    oc.warn(problem("rank_mismatch", field="rank_id", found=rid, rank=ctx.rank))
        elif f.name == "profiler_metadata.json":
            with ctx.reading(f, "profiler_metadata.json") as oc:
                md = load_json(f, "profiler_metadata")
                if isinstance(md, dict):
                    ctx.meta.extra["user_metadata"] = md
    return info


def _fill_info_meta(ctx: ReadContext, info: dict[str, Any] | None) -> dict[str, Any]:
    """Collection metadata from MindSpore's profiler_info: versions, level, switches."""
    m = ctx.meta
    params: dict[str, Any] = {}
    if not info:
        return params
    p = info.get("profiler_parameters")
    if isinstance(p, dict):
        params = p
        m.config = {"profiler_parameters": p, "jit_level": info.get("jit_level") or None}
        lvl = p.get("profiler_level")
        if lvl:
            m.level = str(lvl).replace("ProfilerLevel.", "")
    versions = []
    if info.get("ms_version"):
        versions.append(f"MindSpore {info['ms_version']}")
    if info.get("cann_version"):
        versions.append(f"CANN {info['cann_version']}")
    if versions:
        m.producer_version = "; ".join(versions)
    msi = info.get("ms_profiler_info")
    if isinstance(msi, dict):
        dev = int_or_none(msi.get("device_id"))
        if dev is not None and dev >= 0:
            m.device_id = dev
        m.extra["ms_profiler_info"] = msi
    for k in ("cann_profiler_info", "analysis_cost_time"):
        if info.get(k):
            m.extra[k] = info[k]
    return params


def _window(ctx: ReadContext) -> tuple[int, int] | None:
    m = WINDOW_DIR_RE.match(ctx.plan.root.parent.name)
    if not m:
        return None
    ctx.meta.extra["dynamic_window"] = {"start_step": int(m.group(2)), "stop_step": int(m.group(3))}
    return int(m.group(2)), int(m.group(3))


def _log_stage(root: Path) -> str:
    """How far the profiler got, from its own logs: started | stopped | analysed."""
    stage = "none"
    for log in sorted((root / "logs").glob("*.log")) if (root / "logs").is_dir() else []:
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "start." in text and stage == "none":
            stage = "started"
        if "Profiler stop." in text and stage in ("none", "started"):
            stage = "stopped"
        if "analyse." in text or "TaskManager run flow" in text:
            stage = "analysed"
    return stage


@register("mindspore")
def read_mindspore(ctx: ReadContext) -> None:
    plan = ctx.plan
    root = plan.root
    out = root / OUTPUT_DIR
    info = _read_profiler_info(ctx, root)
    window = _window(ctx)
    cpu = cpu_files([f for f in plan.files if f.parent == root / "FRAMEWORK"])
    for f in plan.files:
        rel = f.relative_to(root).parts
        if rel[0] == "logs":
            ctx.ignore(f, problem("ignored.ms_log"))
    # host-CPU text files written by the framework itself (they survive an abnormal exit)
    if "cpu_ms_memory_record" in cpu:
        read_memory_record(ctx, cpu["cpu_ms_memory_record"])
    if "cpu_op_type_info" in cpu:
        read_op_type_info(ctx, cpu["cpu_op_type_info"])
    if "cpu_op_detail_info" in cpu:
        read_op_detail_info(ctx, cpu["cpu_op_detail_info"])
    names = {f.name for f in plan.files if f.parent == out}
    parsed = any(n in names for n in TEXT_MARKERS)
    m = ctx.meta
    if parsed:
        for kind in ("cpu_op_execute_timestamp", "cpu_framework"):
            if kind in cpu:
                ctx.ignore(cpu[kind], problem("ignored.ms_cpu_same"))
        # a CPU run (a trace, no kernels): its collectives are host ops of the CPU OP lane
        cpu_run = "kernel_details.csv" not in names and "trace_view.json" in names
        st = read_output_folder(ctx, MS_OP_PROCESSES, (CPU_PROCESS, collective_type) if cpu_run else None)
        if cpu_run and st.trace is not None:
            write_cpu_comm_ops(ctx, st.trace.picker.collectives)
    elif ms_dbs := sorted(f for f in plan.files if f.parent == out and MINDSPORE_DB_RE.match(f.name)):
        _read_db(ctx, ms_dbs)
    else:
        prof_exports = [p for p in sorted(root.glob(f"PROF_*/{EXPORT_DIR}")) if p.is_dir()]
        stage = _log_stage(root)
        if "cpu_op_execute_timestamp" in cpu:
            write_cpu_ops_from_timestamps(ctx, cpu["cpu_op_execute_timestamp"], cpu.get("cpu_framework"))
            m.status = "partial"
            when = english("missing.part.after_stop" if stage == "stopped" else "missing.part.before_analyse")
            m.missing.append(english("missing.mindspore.not_analysed", when=when))
        elif prof_exports:
            st = ExportState()
            for exp in prof_exports:
                read_export(ctx, st, export_files(plan.files, exp))
            m.status = "partial"
            m.missing.append(english("missing.mindspore.cann_only"))
        else:
            m.status = "unparsed"
            raw = [
                f
                for f in plan.files
                if f.relative_to(root).parts[0] == "FRAMEWORK" or f.relative_to(root).parts[0].startswith("PROF_")
            ]
            if raw:
                m.missing.append(english("missing.mindspore.not_parsed", hint=OFFLINE_HINT))
            elif stage in ("none", "started"):
                m.missing.append(english("missing.mindspore.exited_early"))
            else:
                m.missing.append(english("missing.mindspore.no_data"))
    _fill_after(ctx, info, window, cpu, parsed)
    for f in plan.files:
        rel = f.relative_to(root).parts
        if rel[0] == "FRAMEWORK":
            ctx.ignore(f, problem("ignored.ms_raw_framework", folder=OUTPUT_DIR))
        elif rel[0].startswith("PROF_"):
            ctx.ignore(f, problem("ignored.ms_raw_cann_parsed", folder=OUTPUT_DIR))


def _read_db(ctx: ReadContext, dbs: list[Path]) -> None:
    """export_type=db: ``ascend_mindspore_profiler_{rank}.db`` (msprof-style tables, docs/formats.md §2.1)
    and ``communication_analyzer.db`` (the CommAnalyzer* tables of torch_npu's analysis.db), read by
    the torch_npu db reader."""
    out = ctx.plan.root / OUTPUT_DIR
    main = next((f for f in dbs if f.name == f"ascend_mindspore_profiler_{ctx.rank}.db"), dbs[0])
    for other in dbs:
        if other != main:
            ctx.ignore(other, problem("ignored.db_other_rank", rank=ctx.rank, file=main.name))
    analysis = out / COMM_ANALYZER_DB
    analysis = analysis if analysis in ctx.plan.files else None
    groups = Groups(ctx.rank, ctx.plan.hints, ctx.meta.extra.get("user_metadata"))  # read by _read_profiler_info
    tables = expected_tables(False)
    read_ascend_db(ctx, main, analysis, groups, "ascend_mindspore_profiler.db", "a MindSpore profiler db", tables)
    if analysis is None:
        ctx.meta.missing.append(english("missing.mindspore.no_analyzer_db"))


_NOT_FOR_MINDSPORE = (
    "torch_npu.profiler",  # torch_npu's offline parser
    "no rank found in profiler_info",  # torch_npu's rank sources
    "no step ranges: the profiler ran",  # replaced by a MindSpore sentence
    "no memory records in the export",  # replaced by a MindSpore sentence
)
_CPU_ONLY_COVERS = ("no kernel_details.csv", "no communication operations")


def _tidy_sentences(ctx: ReadContext, cpu_only: bool) -> None:
    """Drop the torch_npu reader's sentences that do not hold for MindSpore (its profiler_info
    schema differs, it names torch_npu's offline parser) or that the CPU-only sentence covers."""
    keep = []
    for s in ctx.meta.missing:
        if any(k in s for k in _NOT_FOR_MINDSPORE) or (cpu_only and s.startswith(_CPU_ONLY_COVERS)):
            continue
        if s not in keep:
            keep.append(s)
    ctx.meta.missing[:] = keep


def _fill_after(
    ctx: ReadContext, info: dict[str, Any] | None, window: tuple[int, int] | None, cpu: dict[str, Path], parsed: bool
) -> None:
    m = ctx.meta
    w = ctx.writer
    params = _fill_info_meta(ctx, info)
    ctx.add_table_capabilities()
    if m.status == "unparsed":
        return
    acts = [str(a) for a in (params.get("activities") or [])]
    cpu_only = not w.has("kernels") and not any("NPU" in a for a in acts)
    _tidy_sentences(ctx, cpu_only)
    if cpu_only:
        comm = english("missing.part.cpu_collectives" if w.has("comm_ops") else "missing.part.no_collective")
        m.missing.append(english("missing.mindspore.cpu_only", comm=comm))
    if not w.has("steps"):
        step_note = english("missing.part.window", first=window[0], last=window[1]) if window else ""
        m.missing.append(english("missing.mindspore.no_steps", window=step_note))
    if "cpu_ms_memory_record" not in cpu and not w.has("memory_samples"):
        m.missing.append(english("missing.mindspore.no_memory"))
    if info is None and m.status != "unparsed":
        m.missing.append(english("missing.mindspore.no_info"))
    if not parsed and "operators" not in m.capabilities:
        m.missing.append(english("missing.mindspore.no_framework"))
