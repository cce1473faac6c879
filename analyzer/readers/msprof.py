"""msprof command-line output: a ``PROF_{n}_{ts}_{rand}/`` folder (formats.md §3).

What is read, by folder:

| where | file(s) | table(s) |
|---|---|---|
| ``mindstudio_profiler_output/`` (``msprof --export=on``) | ``op_summary_*.csv`` | ``kernels`` (+ PMU columns -> ``kernel_metrics``) |
| | ``op_statistic_*``, ``api_statistic_*``, ``communication_statistic_*`` | ``statistics`` |
| | ``step_trace_*.csv`` | ``steps`` (Iteration ID, end - iteration time .. end) |
| | ``task_time_*.csv`` | ``kernels`` when there is no op_summary; ``slices`` when there is no msprof json |
| | ``npu_mem_*``, ``npu_module_mem_*``, ``memory_record_*`` (**KB**) | ``memory_samples`` |
| | ``operator_memory_*`` (**KB**) | ``operator_memory`` |
| | ``msprof_*.json`` (timeline) | ``slices``, ``lanes``, ``counters``; ``comm_ops`` from the HCCL big ops; ``kernels`` from the Ascend Hardware lanes when no CSV gives them |
| top of the PROF folder (``msprof --type=db``, no text export) | ``msprof_{ts}.db`` (+ ``analyze/communication_analyzer.db``) | the torch_npu db reader's tables (``read_ascend_db``): kernels, timeline, CANN API, communication, ``NPU_OP_MEM`` memory |
| ``device_{d}/timeline/`` (CANN <= 7.0, MindSpore <= 2.2) | ``msprof_{d}_{model}_{iter}.json`` (else ``task_time_*`` + ``hccl_*``) | as the msprof json, times converted from the device's monotonic clock with ``start_info.{d}``; ``steps`` from the ``Iteration N`` events |
| ``device_*/``, ``host/`` | ``info.json*``, ``start_info*``, ``end_info*`` | collection metadata (host, device, rank_id, clock) |

Sliced exports (``{name}_slice_{n}_{ts}.csv|json``, one slice per million rows) are read in order of
``n`` as one file. Every msprof memory size is in KB (1024 bytes), times are µs strings parsed to
exact ns. A PROF folder without ``mindstudio_profiler_output/`` (and without the old per-device
timelines) was never exported: it is recorded as ``unparsed`` with the command to run.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa

from ..errors import InputError
from ..format import a_or_an
from ..units import KIB, us_text_to_ns
from .base import ReadContext, register
from .chrome_trace import Event, TraceStream, id_text, times_ns
from .comm_names import P2P_TYPES, normalize_op_type
from .csvfile import CsvTable, read_csv
from .scratch import ScratchStage
from .torch_npu_common import hccl_bytes
from .torch_npu_text import (
    DeviceTasks,
    TextExport,
    TraceRouter,
    is_device_lane,
    lane_group,
    read_api_statistic,
    read_kernel_csv,
    read_op_statistic,
)

PROF_DIR_RE = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")
EXPORT_DIR = "mindstudio_profiler_output"
EXPORT_HINT = (
    "export it with `msprof --export=on --output=<this PROF_ folder>` on a host with the CANN toolkit "
    "(an Ascend machine), then ingest again"
)
# {name}[_slice_{n}]_{YYYYmmddHHMMSS}.csv|json (the timestamp has 14 digits; accept a few more)
_EXPORT_NAME = re.compile(r"^(?P<kind>.+?)(?:_slice_(?P<n>\d+))?_(?P<ts>\d{14,17})\.(?P<ext>csv|json)$")
# legacy per-device, per-iteration timelines: {kind}_{device}_{model}_{iteration}.json
_LEGACY_TIMELINE = re.compile(
    r"^(?P<kind>msprof|task_time|hccl|step_trace|ai_core_utilization)_(?P<d>\d+)_(?P<m>\d+)_(?P<i>\d+)\.json$"
)
_DEVICE_DIR = re.compile(r"^device_(-?\d+)$")
DB_RE = re.compile(r"^msprof_\d{1,20}\.db$")  # msprof --type=db (CANN >= 8), at the PROF folder's top
ANALYSIS_DB = ("analyze", "communication_analyzer.db")  # msprof --analyze=on with a db export
_ITER_RE = re.compile(r"^Iteration (\d+)$")
_COMM_LANE_RE = re.compile(r"^Group (?P<g>.+?) Communication$")

# kinds of mindstudio_profiler_output this version does not ingest, with the reason shown to the user
_NOT_INGESTED = {
    "msprof_tx": "mstx/msproftx markers are not ingested by this version",
    "fusion_op": "graph fusion summary is not ingested by this version",
    "static_op_mem": "static graph memory plan (no timestamps) is not ingested by this version",
    "aicpu": "AI CPU task details are not ingested by this version",
    "aicpu_mi": "AI CPU data-queue details are not ingested by this version",
    "dp": "data-preprocess summary is not ingested by this version",
    "l2_cache": "L2 cache rates of msprof exports are not ingested by this version",
}

STEP_TRACE_COLS = {
    "device": ("Device_id",),
    "iteration": ("Iteration ID",),
    "fp_start": ("FP Start(us)",),
    "bp_end": ("BP End(us)",),
    "end": ("Iteration End(us)",),
    "time": ("Iteration Time(us)",),
    "model": ("Model ID",),
}
TASK_TIME_COLS = {
    "device": ("Device_id",),
    "name": ("kernel_name",),
    "type": ("kernel_type",),
    "stream": ("stream_id", "Stream ID"),
    "task": ("task_id", "Task ID"),
    "dur": ("task_time(us)",),
    "start": ("task_start(us)",),
    "stop": ("task_stop(us)",),
}
COMM_STAT_COLS = {
    "type": ("OP Type",),
    "count": ("Count",),
    "total": ("Total Time(us)",),
    "min": ("Min Time(us)",),
    "avg": ("Avg Time(us)",),
    "max": ("Max Time(us)",),
    "ratio": ("Ratio(%)",),
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


# ---------------------------------------------------------------------------------------------
# what a PROF folder says about itself (discovery and metadata)
# ---------------------------------------------------------------------------------------------


@dataclass
class ProfIdentity:
    """Who wrote a PROF folder, from ``device_{d}/info.json.{d}`` and ``host/info.json``."""

    rank: int | None = None  # rank_id when set (msprof leaves -1 when the job set no rank)
    hostname: str | None = None
    device_ids: list[int] = field(default_factory=list)
    pid: str | None = None
    exported: bool = False
    legacy_timeline: bool = False


def _json_file(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def prof_identity(d: Path) -> ProfIdentity:
    """Rank (rank_id != -1), host and devices of a ``PROF_*`` folder, without reading its data."""
    ident = ProfIdentity()
    try:
        entries = sorted(d.iterdir())
    except OSError:
        return ident
    for sub in entries:
        m = _DEVICE_DIR.match(sub.name)
        if m and sub.is_dir():
            dev = int(m.group(1))
            if dev >= 0:
                ident.device_ids.append(dev)
            for info_path in sorted(sub.glob("info.json*")):
                if info_path.name.endswith(".done"):
                    continue
                info = _json_file(info_path)
                if isinstance(info, dict):
                    r = info.get("rank_id", info.get("rankId"))
                    if isinstance(r, str) and r.lstrip("-").isdigit():
                        r = int(r)
                    if isinstance(r, int) and r >= 0 and ident.rank is None:
                        ident.rank = r
                    ident.hostname = ident.hostname or _str(info.get("hostname"))
                    ident.pid = ident.pid or _str(info.get("pid"))
            if (sub / "timeline").is_dir() and any(
                _LEGACY_TIMELINE.match(p.name) for p in (sub / "timeline").iterdir()
            ):
                ident.legacy_timeline = True
        elif sub.name == "host" and sub.is_dir():
            info = _json_file(sub / "info.json")
            if isinstance(info, dict):
                ident.hostname = ident.hostname or _str(info.get("hostname"))
                ident.pid = ident.pid or _str(info.get("pid"))
        elif sub.name == EXPORT_DIR and sub.is_dir():
            ident.exported = any(_EXPORT_NAME.match(p.name) for p in sub.iterdir())
    return ident


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def order_unranked(plans: Iterable[Any]) -> None:
    """msprof folders without a rank_id: number them by (host, device id), msprof-analyze's fallback
    (formats.md §7.5). ``plans`` are CollectionPlans with ``hints['msprof']`` set by discovery."""
    todo = [p for p in plans if p.rank is None]
    if not todo:
        return
    taken = {p.rank for p in plans if p.rank is not None}

    def key(p: Any) -> tuple[str, int, str]:
        h = p.hints.get("msprof") or {}
        devs = h.get("device_ids") or []
        return (h.get("hostname") or "", min(devs) if devs else -1, p.rel_root)

    nxt = 0
    for p in sorted(todo, key=key):
        while nxt in taken:
            nxt += 1
        p.rank, p.rank_source = nxt, "host_device_order"
        nxt += 1


# ---------------------------------------------------------------------------------------------
# the reader
# ---------------------------------------------------------------------------------------------


@dataclass
class ExportFile:
    kind: str
    slice_no: int
    path: Path


class MsprofState:
    """What the files of one PROF folder share while they are read."""

    def __init__(self, ctx: ReadContext):
        self.ctx = ctx
        self.text = TextExport(ctx)  # the torch_npu text reader's state: kernels read by its code
        self.next_kernel_id = 0
        self.device_ids: set[int] = set()
        self.steps: list[tuple[int, int, int]] = []
        self.has_timeline_kernels = False
        self.read_kinds: set[str] = set()
        self.empty_export = False
        self.db_export = False  # read from msprof_{ts}.db (msprof --type=db)


@register("msprof")
def read_msprof(ctx: ReadContext) -> None:
    st = MsprofState(ctx)
    root = ctx.plan.root
    clocks = _read_prof_meta(ctx, st, root)
    export = _export_files(ctx.plan.files, root / EXPORT_DIR)
    legacy = _legacy_timelines(ctx.plan.files, root)
    if export:
        read_export(ctx, st, export)
        if all(_size(f.path) == 0 for fs in export.values() for f in fs):
            st.empty_export = True
            ctx.meta.missing.append(
                f"nothing to read: every file of {EXPORT_DIR}/ is empty (0 bytes), msprof exported no data"
            )
    elif legacy:
        _read_legacy(ctx, st, legacy, clocks)
    elif dbs := sorted(p for p in ctx.plan.files if p.parent == root and DB_RE.match(p.name)):
        st.db_export = True
        _read_db(ctx, dbs)
    else:
        ctx.meta.status = "unparsed"
        ctx.meta.missing.append(f"not exported: this PROF folder holds raw data only, no {EXPORT_DIR}/; {EXPORT_HINT}")
    _ignore_rest(ctx, root)
    _finish_meta(ctx, st)


def _read_db(ctx: ReadContext, dbs: list[Path]) -> None:
    """A db export (``msprof --type=db``): the newest ``msprof_{ts}.db`` through the torch_npu db reader
    (the same CANN tables; formats.md §3.4), with ``analyze/communication_analyzer.db`` when
    ``msprof --analyze`` wrote it (the wait/transit split, bandwidth and matrix)."""
    from .torch_npu_common import Groups
    from .torch_npu_db import read_ascend_db

    root = ctx.plan.root
    main = dbs[-1]  # one db per export; a re-export leaves a newer timestamp
    for old in dbs[:-1]:
        ctx.ignore(old, f"older msprof db export ({main.name} is read)")
    analysis = root.joinpath(*ANALYSIS_DB)
    groups = Groups(ctx.rank, ctx.plan.hints, None)
    read_ascend_db(ctx, main, analysis if analysis in ctx.plan.files else None, groups, "msprof.db", "an msprof db")
    if analysis not in ctx.plan.files:
        ctx.meta.missing.append(
            "no analyze/communication_analyzer.db (msprof --analyze=on): no wait/transit split, "
            "bandwidth or communication matrix"
        )


def read_export(ctx: ReadContext, st: MsprofState, export: dict[str, list[ExportFile]]) -> None:
    """Read the files of a ``mindstudio_profiler_output/`` folder (also used for the PROF folder a
    MindSpore or torch_npu run left unparsed)."""
    has_summary = "op_summary" in export
    has_json = "msprof" in export
    # steps first, so the rows read after them (timeline kernels, communication) get their step
    order = sorted(export, key=lambda k: (k != "step_trace", k))
    for kind in order:
        files = []
        for f in export[kind]:
            if _size(f.path) == 0:  # msprof leaves 0-byte files for kinds with no data
                ctx.ignore(f.path, "0-byte file: msprof exported no data of this kind")
            else:
                files.append(f)
        if not files:
            continue
        ext = files[0].path.suffix
        if kind == "op_summary" and ext == ".csv":
            for f in files:
                st.next_kernel_id += read_kernel_csv(
                    ctx,
                    st.text,
                    f.path,
                    None,
                    kind="op_summary",
                    first_kernel_id=st.next_kernel_id,
                    step_of=lambda ts: steps_of(st.steps, ts),
                )
        elif kind == "op_statistic" and ext == ".csv":
            for f in files:
                read_op_statistic(ctx, f.path, kind="op_statistic")
        elif kind == "api_statistic" and ext == ".csv":
            for f in files:
                read_api_statistic(ctx, f.path, kind="api_statistic")
        elif kind == "communication_statistic" and ext == ".csv":
            for f in files:
                _read_comm_statistic(ctx, f.path)
        elif kind == "step_trace" and ext == ".csv":
            for f in files:
                _read_step_trace(ctx, st, f.path)
        elif kind == "task_time" and ext == ".csv":
            for f in files:
                _read_task_time(ctx, st, f.path, kernels=not has_summary, slices=not has_json)
        elif kind == "npu_mem" and ext == ".csv":
            for f in files:
                _read_npu_mem(ctx, st, f.path)
        elif kind == "npu_module_mem" and ext == ".csv":
            for f in files:
                _read_module_mem_kb(ctx, f.path)
        elif kind == "memory_record" and ext == ".csv":
            for f in files:
                _read_memory_record_kb(ctx, f.path)
        elif kind == "operator_memory" and ext == ".csv":
            for f in files:
                _read_operator_memory_kb(ctx, f.path)
        elif kind == "msprof" and ext == ".json":
            _read_timeline(ctx, st, [f.path for f in files], kernels=not has_summary and "task_time" not in export)
        else:
            base = kind.split(".")[0]
            if base == "step_trace" and ext == ".json":
                has_csv = any(x.path.suffix == ".csv" for x in export.get("step_trace", []))
                reason = "step timeline (JSON): the steps are read from step_trace_*.csv" + (
                    "" if has_csv else ", which this export lacks"
                )
            elif ext == ".json" and base != "msprof_tx":
                reason = f"{base} as JSON (msprof --summary-format=json) is not ingested by this version; export CSV summaries"
            else:
                reason = _NOT_INGESTED.get(base, f"{base} summary is not ingested by this version")
            for f in files:
                ctx.ignore(f.path, reason)
            continue
        st.read_kinds.add(kind)


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return -1


def _export_files(files: Iterable[Path], out: Path) -> dict[str, list[ExportFile]]:
    """Files of the export folder grouped by kind, slices in order of their number."""
    groups: dict[tuple[str, str], list[ExportFile]] = defaultdict(list)
    for p in files:
        if p.parent != out:
            continue
        m = _EXPORT_NAME.match(p.name)
        if not m:
            continue
        n = int(m.group("n")) if m.group("n") is not None else -1
        groups[(m.group("kind"), m.group("ext"))].append(ExportFile(m.group("kind"), n, p))
    out_groups: dict[str, list[ExportFile]] = {}
    for (kind, ext), fs in sorted(groups.items()):
        fs.sort(key=lambda f: (f.slice_no, f.path.name))
        key = kind if kind not in out_groups else f"{kind}.{ext}"
        out_groups[key] = fs
    return out_groups


# ---------------------------------------------------------------------------------------------
# metadata: info.json, start_info, end_info
# ---------------------------------------------------------------------------------------------


@dataclass
class DeviceClock:
    """Device monotonic clock -> host epoch: epoch_ns = mono_ns - mono_begin_ns + begin_epoch_ns."""

    mono_begin_ns: int
    begin_epoch_ns: int

    def epoch_ns(self, mono_ns: int) -> int:
        return mono_ns - self.mono_begin_ns + self.begin_epoch_ns


def _read_prof_meta(ctx: ReadContext, st: MsprofState, root: Path) -> dict[int, DeviceClock]:
    clocks: dict[int, DeviceClock] = {}
    infos: dict[str, Any] = {}
    for p in ctx.plan.files:
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            continue
        if len(rel) != 2 or p.name.endswith(".done"):
            continue
        top, name = rel
        m = _DEVICE_DIR.match(top)
        if not (m or top == "host"):
            continue
        dev = int(m.group(1)) if m else None
        if name.startswith("info.json"):
            with ctx.reading(p, "msprof info.json") as oc:
                info = _load_small_json(p, "info.json")
                oc.rows = 0
                infos[top] = info
                if dev is not None and dev >= 0:
                    st.device_ids.add(dev)
        elif name.startswith("start_info") and dev is not None:
            with ctx.reading(p, "msprof start_info"):
                info = _load_small_json(p, "start_info")
                begin = us_text_to_ns(str(info.get("collectionTimeBegin")))
                mono = info.get("clockMonotonicRaw")
                if begin is None or mono is None:
                    raise InputError(str(p), "not a start_info file: no collectionTimeBegin / clockMonotonicRaw")
                clocks[dev] = DeviceClock(int(str(mono)), begin)
        elif name.startswith("end_info") or name == "host_start.log" or name == "start_info":
            with ctx.reading(p, "msprof clock info"):
                if p.stat().st_size == 0:
                    raise InputError(str(p), "empty file")
    m_ = ctx.meta
    for top, info in sorted(infos.items()):
        if not isinstance(info, dict):
            continue
        m_.hostname = m_.hostname or _str(info.get("hostname"))
        rid = info.get("rank_id")
        dev_info = info.get("DeviceInfo")
        extra = {
            k: info.get(k)
            for k in ("rank_id", "pid", "pid_name", "version", "platform_version")
            if info.get(k) is not None
        }
        if isinstance(dev_info, list) and dev_info and isinstance(dev_info[0], dict):
            extra["device"] = {
                k: dev_info[0].get(k)
                for k in ("id", "ai_core_num", "aic_frequency", "hwts_frequency")
                if k in dev_info[0]
            }
        m_.extra.setdefault("info_json", {})[top] = extra
        if isinstance(rid, int) and rid < 0:
            m_.extra["rank_id_unset"] = True
    return clocks


def _load_small_json(path: Path, kind: str) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(str(path), f"cannot read {kind}: {exc.strerror or exc}") from exc
    if not data.strip():
        raise InputError(str(path), f"empty file: no {kind} data")
    try:
        out = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise InputError(str(path), f"not valid JSON ({kind}): {exc}") from exc
    if not isinstance(out, dict):
        raise InputError(str(path), f"not {a_or_an(kind)} file: the JSON is not an object")
    return out


# ---------------------------------------------------------------------------------------------
# summary CSVs specific to msprof (KB memory, task_time, step_trace, communication_statistic)
# ---------------------------------------------------------------------------------------------


def _warn_all(outcome: Any, t: CsvTable) -> None:
    for w in t.warnings:
        outcome.warn(w)


def _kb(values: list[float | None], minus_one_null: bool = False) -> list[int | None]:
    out: list[int | None] = []
    for v in values:
        if v is None or (minus_one_null and v == -1):
            out.append(None)
        else:
            out.append(round(v * KIB))
    return out


def _npu_device(device_ids: list[int | None], devices: list[str | None]) -> list[str | None]:
    out = []
    for d, name in zip(device_ids, devices):
        if name:
            out.append(name if not name.isdigit() else f"NPU:{name}")
        else:
            out.append(f"NPU:{d}" if d is not None else None)
    return out


def _read_comm_statistic(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "communication_statistic") as outcome:
        t = read_csv(path, "communication_statistic CSV", COMM_STAT_COLS, required=("type", "count", "total"))
        _warn_all(outcome, t)
        outcome.rows = ctx.write(
            "statistics",
            {
                "kind": ["communication_statistic"] * t.n_rows,
                "name": t.text("type"),
                "count": t.ints("count"),
                "total_ns": t.ns_from_us("total"),
                "min_ns": t.ns_from_us("min"),
                "avg_ns": t.ns_from_us("avg"),
                "max_ns": t.ns_from_us("max"),
                "ratio_pct": t.floats("ratio"),
            },
        )


def _read_step_trace(ctx: ReadContext, st: MsprofState, path: Path) -> None:
    with ctx.reading(path, "step_trace") as outcome:
        t = read_csv(path, "step_trace CSV", STEP_TRACE_COLS, required=("iteration", "end", "time"))
        _warn_all(outcome, t)
        it = t.ints("iteration")
        end = t.ns_from_us("end")
        dur = t.ns_from_us("time")
        rows: dict[str, list[Any]] = {"step": [], "start_ns": [], "end_ns": [], "dur_ns": [], "source": []}
        for s, e, d in zip(it, end, dur):
            if s is None or e is None or d is None:
                continue
            rows["step"].append(s)
            rows["start_ns"].append(e - d)
            rows["end_ns"].append(e)
            rows["dur_ns"].append(d)
            rows["source"].append("msprof step_trace")
            st.steps.append((s, e - d, e))
        outcome.rows = ctx.write("steps", rows)
        skipped = t.n_rows - len(rows["step"])
        if skipped:
            outcome.warn(f"{skipped} row(s) without iteration id, end or time skipped")


def steps_of(steps: list[tuple[int, int, int]], ts: list[int | None]) -> list[int | None]:
    """The step (``steps``: (step, start ns, end ns)) whose [start, end) holds each time; None
    outside every step (the first such step when ranges overlap)."""
    ordered = sorted(steps, key=lambda s: s[1])
    starts = [s[1] for s in ordered]
    out: list[int | None] = []
    for t in ts:
        hit = None
        if t is not None:
            i = bisect.bisect_right(starts, t)
            for s, a, b in ordered[max(0, i - 8) : i]:  # ranges are disjoint in practice; a few back for overlaps
                if a <= t < b:
                    hit = s
                    break
        out.append(hit)
    return out


def _read_task_time(ctx: ReadContext, st: MsprofState, path: Path, kernels: bool, slices: bool) -> None:
    if not kernels and not slices:
        ctx.ignore(path, "device tasks already read from op_summary and the msprof json timeline")
        return
    with ctx.reading(path, "task_time") as outcome:
        t = read_csv(path, "task_time CSV", TASK_TIME_COLS, required=("type", "start", "dur"))
        _warn_all(outcome, t)
        n = t.n_rows
        names = [nm if nm is not None else ty for nm, ty in zip(t.text("name"), t.text("type"))]
        types = t.text("type")
        dev = t.ints("device")
        st.device_ids.update(d for d in dev if d is not None)
        stream = t.ints("stream")
        ts = t.ns_from_us("start")
        dur = t.ns_from_us("dur")
        comm = [
            (ty or "").upper() in ("HCCL", "COMMUNICATION") or (nm or "").startswith("hcom_")
            for nm, ty in zip(names, types)
        ]
        if kernels:
            first = st.next_kernel_id
            st.next_kernel_id += n
            outcome.rows += ctx.write(
                "kernels",
                {
                    "kernel_id": list(range(first, first + n)),
                    "name": names,
                    "core_type": types,
                    "is_communication": comm,
                    "device_id": dev,
                    "stream_id": stream,
                    "task_id": t.ints("task"),
                    "ts_ns": ts,
                    "dur_ns": dur,
                },
            )
        if slices:
            pid = [f"NPU {d}" if d is not None else "NPU" for d in dev]
            tid = [str(s) if s is not None else "" for s in stream]
            args = [
                json.dumps({"Task Type": ty, "Stream Id": s, "Task Id": k})
                for ty, s, k in zip(types, stream, t.ints("task"))
            ]
            outcome.rows += ctx.write(
                "slices",
                {
                    "pid": pid,
                    "tid": tid,
                    "name": names,
                    "category": ["task_time"] * n,
                    "ts_ns": ts,
                    "dur_ns": dur,
                    "event_id": list(range(n)),
                    "args": args,
                },
            )
            counts: dict[tuple[str, str], int] = defaultdict(int)
            for p, q in zip(pid, tid):
                counts[(p, q)] += 1
            keys = sorted(counts)
            ctx.write(
                "lanes",
                {
                    "pid": [k[0] for k in keys],
                    "tid": [k[1] for k in keys],
                    "process": ["Ascend Hardware"] * len(keys),
                    "lane": [f"Stream {k[1]}" for k in keys],
                    "lane_group": ["device"] * len(keys),
                    "n_slices": [counts[k] for k in keys],
                },
            )


def _read_npu_mem(ctx: ReadContext, st: MsprofState, path: Path) -> None:
    with ctx.reading(path, "npu_mem") as outcome:
        t = read_csv(path, "npu_mem CSV", NPU_MEM_COLS, required=("event", "memory", "ts"))
        _warn_all(outcome, t)
        dev = t.ints("device")
        st.device_ids.update(d for d in dev if d is not None)
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


def _read_module_mem_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "npu_module_mem") as outcome:
        t = read_csv(path, "npu_module_mem CSV", MODULE_MEM_KB_COLS, required=("component", "ts", "reserved"))
        _warn_all(outcome, t)
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


def _read_memory_record_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "memory_record") as outcome:
        t = read_csv(path, "memory_record CSV", MEM_RECORD_KB_COLS, required=("component", "ts"))
        _warn_all(outcome, t)
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


def _read_operator_memory_kb(ctx: ReadContext, path: Path) -> None:
    with ctx.reading(path, "operator_memory") as outcome:
        t = read_csv(path, "operator_memory CSV", OP_MEM_KB_COLS, required=("name", "size", "alloc"))
        _warn_all(outcome, t)
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


# ---------------------------------------------------------------------------------------------
# chrome-trace timelines: msprof_*.json and the legacy per-device timelines
# ---------------------------------------------------------------------------------------------


class _HcclArgs(msgspec.Struct, gc=False):
    data_type: str | None = None
    count: int | float | None = None
    alg_type: str | None = None


_HCCL_DEC = msgspec.json.Decoder(_HcclArgs)


def _dec(dec: msgspec.json.Decoder, raw: msgspec.Raw) -> Any:
    if not len(raw):
        return None
    try:
        return dec.decode(raw)
    except msgspec.DecodeError:
        return None


def _ns_text(ns: int) -> str:
    """Exact ns as a µs decimal string (what the trace reader parses without float rounding)."""
    sign = "-" if ns < 0 else ""
    a = abs(ns)
    return f"{sign}{a // 1000}.{a % 1000:03d}"


class TimelinePass:
    """Reads Ascend chrome-trace arrays (msprof json, legacy timelines) through the torch_npu trace
    router (slices, lanes, counters) and picks device tasks, communication ops and iterations."""

    def __init__(self, ctx: ReadContext, st: MsprofState, kernels: bool, clock: DeviceClock | None = None):
        self.ctx = ctx
        self.st = st
        self.stage = ScratchStage(ctx.scratch_dir())
        self.router = TraceRouter(ctx, self.stage)
        self.want_kernels = kernels
        self.clock = clock
        self.kernels = DeviceTasks()
        self.comms: list[dict[str, Any]] = []
        self.iterations: dict[int, list[int]] = {}

    def feed_file(self, path: Path, kind: str) -> None:
        with self.ctx.reading(path, kind) as outcome:
            ts = TraceStream(path)
            for events in ts.blocks():
                if self.clock is not None:
                    self._to_epoch(events)
                self.router.route(events)
                self._pick(events)
            outcome.rows = ts.n_events
            for w in ts.warnings:
                outcome.warn(w)
            if ts.n_events == 0:
                raise InputError(str(path), "trace has no events")

    def _to_epoch(self, events: list[Event]) -> None:
        clock = self.clock
        assert clock is not None
        for e in events:
            if e.ts is None or e.ph == "M":
                continue
            mono = times_ns([e.ts]).to_pylist()[0] if isinstance(e.ts, str) else round(float(e.ts) * 1000)
            if mono is not None:
                e.ts = _ns_text(clock.epoch_ns(mono))

    def _pick(self, events: list[Event]) -> None:
        r = self.router
        for e in events:
            if e.ph != "X":
                continue
            pid = id_text(e.pid)
            tid = id_text(e.tid)
            proc = r.process(pid)
            group = lane_group(proc)
            lane = r.lane(pid, tid)
            if e.cat and e.cat == "Iteration Time":
                m = _ITER_RE.match(e.name)
                if m:
                    self._iteration(int(m.group(1)), e)
                continue
            if e.cat:
                continue
            if self.want_kernels and is_device_lane(proc, lane):
                self.kernels.pick(e)
            elif group == "communication" and not lane.startswith("Plane"):
                self._comm(e, lane)

    def _iteration(self, step: int, e: Event) -> None:
        t = times_ns([e.ts, e.dur if e.dur is not None else 0.0]).to_pylist()
        if t[0] is None:
            return
        s, end = t[0], t[0] + (t[1] or 0)
        cur = self.iterations.get(step)
        self.iterations[step] = [min(cur[0], s), max(cur[1], end)] if cur else [s, end]

    def _comm(self, e: Event, lane: str) -> None:
        a = _dec(_HCCL_DEC, e.args)
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

    def finish(self) -> None:
        ctx = self.ctx
        staged = self.stage.close()
        r = self.router
        if "counters" in staged:
            import pyarrow.parquet as pq

            c = pq.read_table(staged["counters"])
            names = r.lanes.process_names
            proc = pa.array([names.get(p, p) for p in c.column("_pid").to_pylist()], pa.string())
            ctx.write("counters", c.drop(["_pid"]).append_column("process", proc))
        if r.lane_counts:
            ctx.write("lanes", r.lane_rows())
        if self.iterations:
            steps = sorted((k, v[0], v[1]) for k, v in self.iterations.items())
            self.st.steps.extend(steps)
            ctx.write(
                "steps",
                {
                    "step": [s[0] for s in steps],
                    "start_ns": [s[1] for s in steps],
                    "end_ns": [s[2] for s in steps],
                    "dur_ns": [s[2] - s[1] for s in steps],
                    "source": ["Iteration"] * len(steps),
                },
            )
        if self.kernels:
            first = self.st.next_kernel_id
            self.st.next_kernel_id += len(self.kernels)
            ctx.write("kernels", self.kernels.columns(first, self._steps_of))
            self.st.has_timeline_kernels = True
        if self.comms:
            ts = times_ns([c["ts"] for c in self.comms]).to_pylist()
            dur = times_ns([c["dur"] for c in self.comms]).to_pylist()
            rows = []
            for c, t0, d in zip(self.comms, ts, dur):
                op = normalize_op_type(c["name"].rsplit("/", 1)[-1])
                rows.append(
                    {
                        "step": self._steps_of([t0])[0],
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

    def _steps_of(self, ts: list[int | None]) -> list[int | None]:
        return steps_of(self.st.steps + [(k, v[0], v[1]) for k, v in self.iterations.items()], ts)


def _read_timeline(ctx: ReadContext, st: MsprofState, paths: list[Path], kernels: bool) -> None:
    tp = TimelinePass(ctx, st, kernels)
    for p in paths:
        tp.feed_file(p, "msprof timeline")
    tp.finish()


# ---------------------------------------------------------------------------------------------
# legacy CANN per-device timelines (device_{d}/timeline/*.json, device monotonic clock)
# ---------------------------------------------------------------------------------------------


@dataclass
class LegacyFile:
    kind: str
    device: int
    model: int
    iteration: int
    path: Path


def _legacy_timelines(files: Iterable[Path], root: Path) -> list[LegacyFile]:
    out = []
    for p in files:
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            continue
        if len(rel) != 3 or rel[1] != "timeline" or not _DEVICE_DIR.match(rel[0]):
            continue
        m = _LEGACY_TIMELINE.match(p.name)
        if m:
            out.append(LegacyFile(m.group("kind"), int(m.group("d")), int(m.group("m")), int(m.group("i")), p))
    return sorted(out, key=lambda f: (f.device, f.model, f.iteration, f.kind))


def _read_legacy(ctx: ReadContext, st: MsprofState, files: list[LegacyFile], clocks: dict[int, DeviceClock]) -> None:
    """Per-iteration timelines: msprof_* holds the union of task_time_*, hccl_* and the iteration's
    step events, so the others are read only when msprof_* is missing."""
    by_dev: dict[int, list[LegacyFile]] = defaultdict(list)
    for f in files:
        by_dev[f.device].append(f)
    for dev, fs in sorted(by_dev.items()):
        st.device_ids.add(dev)
        clock = clocks.get(dev)
        if clock is None:
            ctx.meta.missing.append(
                f"device {dev}: no start_info.{dev}, so its timeline stays on the device's monotonic clock (not wall time)"
            )
        have = {f.kind for f in fs}
        read_kinds = ("msprof",) if "msprof" in have else ("task_time", "hccl")
        tp = TimelinePass(ctx, st, kernels=True, clock=clock)
        for f in fs:
            if f.kind in read_kinds:
                tp.feed_file(f.path, f"legacy {f.kind} timeline")
            elif f.kind in ("task_time", "hccl", "step_trace"):
                ctx.ignore(f.path, f"same events as msprof_{f.device}_{f.model}_{f.iteration}.json, which was read")
            else:
                ctx.ignore(f.path, "AI Core utilisation timeline is not ingested by this version")
        tp.finish()
    ctx.meta.extra["legacy_timeline"] = True


# ---------------------------------------------------------------------------------------------
# the rest of the folder
# ---------------------------------------------------------------------------------------------


def _ignore_rest(ctx: ReadContext, root: Path) -> None:
    for p in ctx.plan.files:
        if p in ctx.outcomes:
            continue
        try:
            rel = p.relative_to(root).parts
        except ValueError:
            ctx.ignore(p, "not part of the PROF folder")
            continue
        top = rel[0]
        if p.name.endswith(".done"):
            ctx.ignore(p, "msprof completion marker")
        elif top == EXPORT_DIR:
            if p.name == "README.txt":
                ctx.ignore(p, "msprof export notes")
            else:
                ctx.ignore(p, "not a file of the msprof export this version reads")
        elif top == "mindstudio_profiler_log":
            ctx.ignore(p, "msprof export log")
        elif top == "analyze":
            ctx.ignore(
                p,
                "msprof --analyze output is not ingested by this version (read the per-op communication from the timeline)",
            )
        elif len(rel) == 1 and DB_RE.match(p.name):
            ctx.ignore(p, f"the same data as the text export in {EXPORT_DIR}/, which was read")
        elif len(rel) > 2 and rel[1] in ("data", "sqlite"):
            ctx.ignore(p, f"raw msprof data; its exported form is in {EXPORT_DIR}/")
        else:
            ctx.ignore(p, "msprof raw or intermediate file, not ingested")


def _finish_meta(ctx: ReadContext, st: MsprofState) -> None:
    m = ctx.meta
    w = ctx.writer
    if len(st.device_ids) == 1:
        m.device_id = next(iter(st.device_ids))
    ctx.add_table_capabilities()
    if m.status == "unparsed" or st.empty_export:
        return
    m.missing.append("no framework operators: msprof records CANN and device activity only")
    db = st.db_export
    if not w.has("slices"):
        m.missing.append(
            "no timeline: "
            + ("the db has no TASK / CANN_API rows" if db else "the export has no msprof_*.json (or task_time) file")
        )
    if not w.has("kernels"):
        m.missing.append(
            "no device kernels: "
            + ("the db has no COMPUTE_TASK_INFO rows" if db else "the export has no op_summary / task_time file")
        )
    if not w.has("steps"):
        m.missing.append(
            "no step ranges: " + ("msprof's db export has no step table" if db else "the export has no step_trace file")
        )
    if not w.has("memory_samples"):
        m.missing.append(
            "no memory records: "
            + (
                "the db has no NPU_MEM / MEMORY_RECORD / OP_MEMORY rows"
                if db
                else "the export has no npu_mem / memory_record / operator_memory file"
            )
            + " (memory collection was off)"
        )
    if not w.has("comm_ops"):
        m.missing.append("no communication operations: single card, or no HCCL op in the window")
    if not db and not w.has("comm_links"):
        m.missing.append("no communication matrix: msprof --analyze output is read only with a db export")
