"""The ASCEND_PROFILER_OUTPUT folder: torch_npu's and MindSpore's text export (docs/formats.md §1, §2.1).
Every file is optional and read on its own; a bad file is recorded and the others are still ingested.

- ``trace_view.json`` (streamed): ``slices``, ``lanes``, ``operators`` (Python ``cpu_op``, self time from nesting),
  ``steps`` (``ProfilerStep#N``), ``counters`` (C events)
- ``kernel_details.csv``: ``kernels`` (+ PMU columns -> ``kernel_metrics``, times renamed ``*_ns``)
- ``l2_cache.csv``: ``kernel_metrics`` ``l2_hit_rate`` / ``l2_victim_rate``, joined to kernels by stream and task id
  (by name order at Level0)
- ``operator_details.csv``: attached to ``operators``: ``device_self_ns`` / ``device_total_ns``, matched by name and
  order, checked against the trace's host durations (see below)
- ``step_trace_time.csv``: ``step_trace``
- ``op_statistic.csv``, ``api_statistic.csv``: ``statistics``
- ``communication.json``: wait / transit / sync / idle of ``comm_ops``; ``comm_bandwidth`` (with size distribution)
- ``communication_matrix.json``: ``comm_links`` (group-local and global ranks), ``comm_groups``
- ``memory_record.csv``, ``npu_module_mem.csv``: ``memory_samples``
- ``operator_memory.csv``: ``operator_memory``
- ``profiler_info_{rank}.json``, ``profiler_metadata.json``: collection metadata, capabilities, missing sentences

``operator_details.csv`` holds one row per framework op instance in start-time order, ``ProfilerStep``
excluded. Its rows are matched to the trace's ``cpu_op`` events by (name, n-th occurrence in start
order); a match is kept only when the CSV's host total duration equals the event's duration (±1 µs),
so a mismatch never attaches wrong numbers. When ``trace_view.json`` is missing, the operators are
written from ``operator_details.csv`` alone (durations and stacks, no timestamps).

``comm_ops`` rows start from the communication rows of ``kernel_details.csv`` (exact start and
duration), else the big ops of the trace's HCCL ``Group N Communication`` lanes, else
``communication.json``; dtype / count / algorithm come from the trace, the wait / transit split and
the group hash from ``communication.json`` (Level1+). ``Total Op Info`` aggregates are not stored
(sum the rows instead). Timestamps are parsed from their µs strings to exact integer ns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ...messages import english, problem
from ..base import ReadContext
from ..common.spill import Staged
from ..common.steps import last_step_started
from .communication import CommTime, read_communication_json, read_matrix_json, write_comm_ops
from .groups import Groups
from .host_ops import nest_order, nesting, sort_order, step_of_starts, time_order, write_in_order
from .kernels import KernelsRead, read_kernels
from .memory import read_memory_record, read_module_mem, read_operator_memory
from .metadata import ProducerFiles, fill_meta, read_producer_files, switch_sentences
from .names import OUTPUT_DIR, PROFILER_INFO_RE, PROFILER_METADATA, TEXT_FILES, TEXT_MARKERS, TORCH_NPU_RAW_HINT
from .summaries import read_api_statistic, read_op_details, read_op_statistic, read_step_trace_time
from .trace_view import AscendTrace, Collectives, outcome_of_trace

# files of ASCEND_PROFILER_OUTPUT this version does not ingest, with the reason shown to the user
_NOT_INGESTED = {
    "data_preprocess.csv": problem("ignored.data_preprocess"),
    "task_time.csv": problem("ignored.task_time_csv"),
    "static_op_mem.csv": problem("ignored.static_op_mem"),
    "hccs.csv": problem("ignored.interconnect"),
    "pcie.csv": problem("ignored.interconnect"),
    "nic.csv": problem("ignored.network"),
    "roce.csv": problem("ignored.network"),
    "soc_pmu.csv": problem("ignored.soc_pmu"),
}


class TextExport:
    """State shared between the files of one output folder."""

    def __init__(
        self, ctx: ReadContext, op_processes: frozenset[str] = frozenset(), collectives: Collectives | None = None
    ):
        self.ctx = ctx
        self.op_processes = op_processes  # see AscendPicker (MindSpore's framework-op processes)
        self.collectives = collectives  # see AscendPicker (MindSpore's collectives on CPU)
        self.root = ctx.plan.root
        # a trace_view.json found on its own (discovery's loose_trace_view): its folder stands for the output folder
        self.out = self.root if ctx.plan.hints.get("loose_trace_view") else self.root / OUTPUT_DIR
        self.files: dict[str, Path] = {}
        self.trace: AscendTrace | None = None
        self.kernels = KernelsRead()
        self.comm_times: list[CommTime] = []
        self.op_details: pa.Table | None = None
        self.op_details_path: Path | None = None
        self.device_ids: set[int] = set()
        self.pf = ProducerFiles()
        self.groups: Groups | None = None


def read_output_folder(
    ctx: ReadContext, op_processes: frozenset[str] = frozenset(), collectives: Collectives | None = None
) -> TextExport:
    """Read the collection's ASCEND_PROFILER_OUTPUT/ (torch_npu's, or MindSpore's with
    ``op_processes``: the trace processes whose events are framework ops, and ``collectives``: the
    process and rule of collectives run as host ops; see AscendPicker). Returns what was read."""
    st = TextExport(ctx, op_processes, collectives)
    plan = ctx.plan
    for f in plan.files:
        if f.parent == st.out:
            st.files[f.name] = f
    st.pf = read_producer_files(ctx, st.root)
    st.groups = Groups(ctx.rank, plan.hints, st.pf.metadata)
    _ignore_others(ctx, st)
    if not st.out.is_dir() or not any(n in st.files for n in TEXT_MARKERS):
        ctx.meta.missing.append(english("missing.ascend.unparsed", folder=OUTPUT_DIR, hint=TORCH_NPU_RAW_HINT))
        if not any(n.endswith((".csv", ".json")) for n in st.files):
            ctx.meta.status = "unparsed"
    f = st.files
    if plan.hints.get("loose_trace_view"):
        ctx.meta.missing.append(english("missing.ascend.loose_trace_view", folder=OUTPUT_DIR))
    if "trace_view.json" in f:
        _read_trace(ctx, st, f["trace_view.json"])
    if "kernel_details.csv" in f:
        st.kernels = read_kernels(ctx, f["kernel_details.csv"], f.get("l2_cache.csv"))
        st.device_ids |= st.kernels.device_ids
    elif "l2_cache.csv" in f:
        with ctx.reading(f["l2_cache.csv"], "l2_cache.csv"):
            raise InputError(str(f["l2_cache.csv"]), problem("l2_no_kernel_details"))
    if "operator_details.csv" in f:
        st.op_details = read_op_details(ctx, f["operator_details.csv"], keep_text=st.trace is None)
        st.op_details_path = f["operator_details.csv"] if st.op_details is not None else None
    if "step_trace_time.csv" in f:
        read_step_trace_time(ctx, f["step_trace_time.csv"])
    if "op_statistic.csv" in f:
        read_op_statistic(ctx, f["op_statistic.csv"])
    if "api_statistic.csv" in f:
        read_api_statistic(ctx, f["api_statistic.csv"])
    if "communication.json" in f:
        st.comm_times = read_communication_json(ctx, f["communication.json"], st.groups)
    if "communication_matrix.json" in f:
        read_matrix_json(ctx, f["communication_matrix.json"], st.groups)
    if "memory_record.csv" in f:
        st.device_ids |= read_memory_record(ctx, f["memory_record.csv"])
    if "npu_module_mem.csv" in f:
        read_module_mem(ctx, f["npu_module_mem.csv"])
    if "operator_memory.csv" in f:
        read_operator_memory(ctx, f["operator_memory.csv"])
    _finish(ctx, st)
    return st


def _ignore_others(ctx: ReadContext, st: TextExport) -> None:
    known = set(TEXT_FILES)
    for p in ctx.plan.files:
        try:
            rel = p.relative_to(st.root)
        except ValueError:
            continue
        top = rel.parts[0]
        if p.parent == st.out:
            if p.name in known:
                continue
            if p.name.endswith(".db"):
                ctx.ignore(p, problem("ignored.db_of_text"))
            else:
                ctx.ignore(p, _NOT_INGESTED.get(p.name) or problem("ignored.not_ingested"))
        elif len(rel.parts) == 1 and (PROFILER_INFO_RE.match(p.name) or p.name == PROFILER_METADATA):
            continue
        elif top == "FRAMEWORK" or top.startswith("PROF_"):
            ctx.ignore(p, problem("ignored.raw_profiler", folder=OUTPUT_DIR))
        elif top == "logs":
            ctx.ignore(p, problem("ignored.torch_npu_log"))
        else:
            ctx.ignore(p, problem("ignored.not_torch_npu"))


def _read_trace(ctx: ReadContext, st: TextExport, path: Path) -> None:
    with ctx.reading(path, "trace_view.json") as outcome:
        # no kernel_details.csv: the kernels are the tasks of the trace's Ascend Hardware lanes
        st.trace = AscendTrace(
            ctx, st.op_processes, device_tasks="kernel_details.csv" not in st.files, collectives=st.collectives
        )
        outcome_of_trace(outcome, st.trace.feed(path))


def _finish(ctx: ReadContext, st: TextExport) -> None:
    trace = st.trace
    staged = trace.close() if trace is not None else {}
    steps = _write_steps(ctx, trace.picker.steps if trace is not None else [])
    if "operators" in staged:
        _write_operators(ctx, st, staged["operators"], steps)
    elif st.op_details is not None:
        _operators_from_details(ctx, st)
    if trace is not None:
        trace.write_counters(staged)
        ctx.write("lanes", trace.router.lane_rows())
        tasks = trace.picker.device_tasks
        if tasks:  # no kernel_details.csv: the kernels of the Ascend Hardware lanes
            ctx.write("kernels", tasks.columns(0, lambda ts: last_step_started(steps, ts)))
    trace_ops = trace.picker.big_comm_ops(trace.router) if trace is not None else []
    write_comm_ops(ctx, st.kernels.comm, trace_ops, st.comm_times, st.groups, steps)
    groups = st.groups
    if groups is not None:
        groups.finish()
        rows = groups.rows()
        if rows:
            ctx.write("comm_groups", rows)
    _fill_text_meta(ctx, st)


def _write_steps(ctx: ReadContext, marks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """ProfilerStep ranges (one per step: a step marked on several threads spans them all) -> steps."""
    if not marks:
        return []
    by: dict[int, list[int]] = {}
    for step, s, e in marks:
        if step in by:
            by[step] = [min(by[step][0], s), max(by[step][1], e)]
        else:
            by[step] = [s, e]
    steps = sorted((k, v[0], v[1]) for k, v in by.items())
    ctx.write(
        "steps",
        {
            "step": [s[0] for s in steps],
            "start_ns": [s[1] for s in steps],
            "end_ns": [s[2] for s in steps],
            "dur_ns": [s[2] - s[1] for s in steps],
            "source": ["ProfilerStep"] * len(steps),
        },
    )
    return steps


def _write_operators(ctx: ReadContext, st: TextExport, staged: Staged, steps: list[tuple[int, int, int]]) -> None:
    """The trace's host ops with their nesting, step and device times (operator_details.csv), by start."""
    ops = staged.table()
    depth, self_ns = nesting(ops, nest_order(ops))
    dev_self, dev_total, matched, bad = _device_times(ops, st.op_details)
    rows = pa.table(
        {
            "step": step_of_starts(steps, ops.column("ts_ns")),
            **{c: ops.column(c) for c in ("name", "category", "tid", "ts_ns", "dur_ns")},
            "self_ns": self_ns,
            "depth": depth,
            **{c: ops.column(c) for c in ("input_shapes", "input_types", "call_stack", "sequence_number", "event_id")},
            "device_self_ns": dev_self,
            "device_total_ns": dev_total,
        }
    )
    write_in_order(ctx, "operators", rows, time_order(ops))
    if st.op_details is not None and st.op_details_path is not None:
        n = st.op_details.num_rows
        oc = ctx.outcomes.get(st.op_details_path)
        if oc is not None and oc.status != "error":
            attached = matched - bad
            if attached < n:
                oc.warn(problem("op_device_times", attached=attached, n=n, unmatched=n - matched, bad=bad))


def _device_times(ops: pa.Table, details: pa.Table | None) -> tuple[pa.Array, pa.Array, int, int]:
    """operator_details.csv's device self / total times of each op (NULL when none), the ops matched
    and those of them whose host duration disagrees (> 1 µs: no times attached). A row matches the op
    of its name and occurrence (``rn``): the ops of a name numbered by (start, longest first, event
    id), ProfilerStep ranges left out."""
    n = ops.num_rows
    nulls = pa.nulls(n, pa.int64())
    if details is None or not details.num_rows or not n:
        return nulls, nulls, 0, 0
    name = ops.column("name").combine_chunks().cast(pa.string())
    both = pc.dictionary_encode(pa.concat_arrays([name, details.column("name").combine_chunks().cast(pa.string())]))
    codes = pc.fill_null(both.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    op_code, det_code = codes[:n], codes[n:]
    # each op's occurrence among the ops of its name
    keyed = pa.table({"_code": op_code, **{c: ops.column(c) for c in ("ts_ns", "dur_ns", "event_id")}})
    order = sort_order(keyed, [("_code", "ascending"), ("ts_ns", "ascending"), ("dur_ns", "descending")])
    grouped = op_code[order]
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    rn = np.empty(n, dtype=np.int64)
    rn[order] = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    det_rn = details.column("rn")
    det_ok = (det_code >= 0) & det_rn.is_valid().to_numpy(zero_copy_only=False)
    det_rn_np = pc.fill_null(det_rn, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    width = int(max(rn.max(), det_rn_np.max())) + 1
    op_key = op_code * width + rn
    op_ok = (op_code >= 0) & ~pc.fill_null(pc.starts_with(name, "ProfilerStep#"), False).to_numpy(zero_copy_only=False)
    det_rows = np.flatnonzero(det_ok)
    det_key = det_code[det_rows] * width + det_rn_np[det_rows]
    by_key = np.argsort(det_key, kind="stable")
    det_key, det_rows = det_key[by_key], det_rows[by_key]
    k = np.minimum(np.searchsorted(det_key, op_key), max(len(det_key) - 1, 0))
    hit = op_ok & (len(det_key) > 0) & (det_key[k] == op_key) if len(det_key) else np.zeros(n, dtype=bool)
    j = det_rows[k] if len(det_rows) else np.zeros(n, dtype=np.int64)

    def take(col: str) -> tuple[np.ndarray, np.ndarray]:
        c = details.column(col).take(pa.array(j))
        return pc.fill_null(c, 0).to_numpy(zero_copy_only=False).astype(np.int64), c.is_valid().to_numpy(
            zero_copy_only=False
        )

    host, host_ok = take("host_total_ns")
    dur_col = ops.column("dur_ns")
    dur = pc.fill_null(dur_col, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    compared = hit & host_ok & dur_col.is_valid().to_numpy(zero_copy_only=False)
    off = np.abs(host - dur) > 1000
    attach = compared & ~off
    dev_self, self_ok = take("device_self_ns")
    dev_total, total_ok = take("device_total_ns")
    return (
        pa.array(dev_self, pa.int64(), mask=~(attach & self_ok)),
        pa.array(dev_total, pa.int64(), mask=~(attach & total_ok)),
        int(hit.sum()),
        int((compared & off).sum()),
    )


def _operators_from_details(ctx: ReadContext, st: TextExport) -> None:
    """No trace_view.json: operators from operator_details.csv (durations, stacks, no timestamps)."""
    d = st.op_details
    assert d is not None
    n = d.num_rows
    ctx.write(
        "operators",
        {
            "name": d.column("name"),
            "category": pa.array(["cpu_op"] * n, pa.string()),
            "dur_ns": d.column("host_total_ns"),
            "self_ns": d.column("host_self_ns"),
            "input_shapes": d.column("input_shapes"),
            "call_stack": d.column("call_stack"),
            "device_self_ns": d.column("device_self_ns"),
            "device_total_ns": d.column("device_total_ns"),
            "event_id": pa.array(np.arange(n), pa.int64()),
        },
    )
    if st.op_details_path is not None:
        oc = ctx.outcomes.get(st.op_details_path)
        if oc is not None:
            oc.warn(problem("no_trace_view"))


def _fill_text_meta(ctx: ReadContext, st: TextExport) -> None:
    fill_meta(ctx, st.pf)
    m = ctx.meta
    if len(st.device_ids) == 1:
        m.device_id = next(iter(st.device_ids))
    picker = st.trace.picker if st.trace is not None else None
    if picker is not None:
        if picker.has_stacks:
            m.capabilities.add("stacks")
        if picker.has_shapes:
            m.capabilities.add("shapes")
        if picker.cann_levels:
            m.capabilities.add("cann_api")
            m.extra["cann_api_events"] = dict(picker.cann_levels)
        if picker.cann_levels.get("Runtime"):
            m.capabilities.add("runtime_api")
    if st.kernels.l2:
        m.capabilities.add("l2_cache")
    if "trace_view.json" not in st.files:
        m.missing.append(english("missing.ascend.no_trace_view"))
    if "kernel_details.csv" not in st.files:
        if picker is not None and picker.device_tasks:
            m.missing.append(english("missing.ascend.kernels_from_trace"))
        else:
            m.missing.append(english("missing.ascend.no_kernel_details"))
    switch_sentences(ctx, st.pf)
