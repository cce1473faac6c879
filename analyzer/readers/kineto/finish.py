"""The end of a Kineto collection: the staged rows finished with numpy (time base, steps of each start,
self time and depth of the operators, memory samples and blocks paired by address), the process
groups and the collection's metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ...factwriter import Origin
from ...messages import english, problem
from ..base import ReadContext
from ..chrome.nesting import depth_and_self
from ..chrome.router import EventRouter
from ..common.spill import Staged
from .picker import KinetoPicker


class Steps:
    """ProfilerStep ranges, to give each row the step its start falls in."""

    def __init__(self, step: np.ndarray, start: np.ndarray, end: np.ndarray):
        order = np.lexsort((step, start))
        self.step, self.start, self.end = step[order], start[order], end[order]

    def of(self, ts: pa.Array) -> pa.Array:
        """Step of each start time: the latest step starting at or before it, if it has not ended."""
        if len(self.start) == 0:
            return pa.nulls(len(ts), pa.int32())
        t = pc.fill_null(ts, 0).to_numpy(zero_copy_only=False)
        k = np.searchsorted(self.start, t, side="right") - 1
        kk = np.maximum(k, 0)
        ok = (k >= 0) & (t < self.end[kk])
        if ts.null_count:
            ok &= ts.is_valid().to_numpy(zero_copy_only=False)
        return pa.array(self.step[kk].astype(np.int32), type=pa.int32(), mask=~ok)


class Files:
    """The collection's trace files, in the order ``_file`` indexes them, and the event id of each
    one's first event: where a staged row came from, for a problem with it to name its file and
    its event's number there."""

    def __init__(self, paths: list[Path], starts: list[int]):
        self.paths = paths
        self.starts = np.asarray(starts or [0], dtype=np.int64)

    def origin(self, batch: pa.RecordBatch | pa.Table, ids: str | pa.Array | None = None) -> Origin:
        """Per row of ``batch``: its file, and its event's number there when ``ids`` (a column of
        event ids, or its name) is given."""
        files = pc.fill_null(batch.column("_file"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        if ids is None:
            return Origin(files)
        col = batch.column(ids) if isinstance(ids, str) else ids
        first = self.starts[np.minimum(files, len(self.starts) - 1)]
        return Origin(files, pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64) - first + 1)


def _file_base(batch: pa.RecordBatch | pa.Table, late_base: dict[int, int]) -> np.ndarray | None:
    """Per-row time base (older Kineto writes baseTimeNanoseconds after the events), or None."""
    if not late_base or not any(late_base.values()) or batch.num_rows == 0:
        return None
    files = pc.fill_null(batch.column("_file"), 0).to_numpy(zero_copy_only=False)
    lut = np.zeros(max(max(late_base), int(files.max())) + 1, dtype=np.int64)
    for k, v in late_base.items():
        lut[k] = v
    return lut[files]


def _add_base(ts: pa.Array, base: np.ndarray | None) -> pa.Array:
    if base is None:
        return ts
    return pc.add(ts, pa.array(base, pa.int64()))


def _with(batch: pa.RecordBatch, table: str, replace: dict[str, pa.Array]) -> pa.Table:
    """The schema columns of ``table`` from a staged batch, some replaced."""
    names = schema.FACTS[table].column_names[3:]  # skip run/rank/collection_id (the writer sets them)
    return pa.table({c: replace[c] if c in replace else batch.column(c) for c in names})


def finish(
    ctx: ReadContext,
    router: EventRouter,
    picker: KinetoPicker,
    staged: dict[str, Staged],
    late_base: dict[int, int],
    metas: list[dict[str, Any]],
) -> None:
    """Finish the staged rows: time base, steps, self time, memory pairing; written batch by batch.
    A problem with a staged row (a time beyond 2100 once the late time base is added) is named on
    its own file (``Files``), not on the file read last."""
    fl = Files(picker.files, router.file_starts)
    if "slices" in staged:
        for b in staged["slices"].batches():
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            ctx.write("slices", _with(b, "slices", {"ts_ns": ts}), fl.origin(b, "event_id"), fl.paths)
    steps = _finish_steps(ctx, staged, late_base, fl)
    ops_index = None
    if "operators" in staged:
        ops_index = _finish_operators(ctx, staged["operators"], late_base, steps, fl)
    if "kernels" in staged:
        for b in staged["kernels"].batches():
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            rows = _with(b, "kernels", {"ts_ns": ts, "step": steps.of(ts)})
            ctx.write("kernels", rows, fl.origin(b, "kernel_id"), fl.paths)
    default_group = _default_group(metas)
    if "comm_ops" in staged:
        # GPU traces: the NCCL kernels are the real communication time; CPU (gloo) traces: the
        # gloo:* / nccl:* ranges on the communication threads.
        comm = staged["comm_ops"].table()  # a few rows per step
        if picker.comm_kernel_rows:
            comm = type_kernels_by_launch(comm, staged["launches"].table() if "launches" in staged else None)
            comm = comm.filter(pc.equal(comm.column("source"), "kineto:kernel"))
        for b in comm.to_batches():
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            rep = {"ts_ns": ts, "step": steps.of(ts)}
            if default_group is not None:
                name, ranks = default_group
                rep["group_name"] = pc.coalesce(b.column("group_name"), pa.scalar(name, pa.string()))
                gr = b.column("group_ranks")
                rep["group_ranks"] = pc.if_else(pc.is_null(gr), pa.scalar(ranks, gr.type), gr)
            ctx.write("comm_ops", _with(b, "comm_ops", rep), fl.origin(b), fl.paths)
    if "memory" in staged:
        _finish_memory(ctx, staged["memory"], late_base, ops_index, fl)
    if "counters" in staged:
        for b in staged["counters"].batches():
            ts = _add_base(b.column("ts_ns"), _file_base(b, late_base))
            ctx.write("counters", _with(b, "counters", {"ts_ns": ts}), fl.origin(b), fl.paths)
    if router.lane_counts:
        ctx.write("lanes", router.lane_rows(lambda pid, group: f"Device {pid}" if group == "device" else pid))
    _write_groups(ctx, picker, metas, default_group if "comm_ops" in staged else None)
    _fill_meta(ctx, picker, metas)


_FROM_LAUNCH = ("bytes", "dtype", "count", "group_name", "group_ranks")


def type_kernels_by_launch(comm: pa.Table, launches: pa.Table | None) -> pa.Table:
    """Collective kernels typed by the ``nccl:*`` range their launch call ran in.

    A kernel is named by its implementation: ``ncclKernel_SendRecv`` runs ``nccl:all_to_all``
    (``c10d::alltoall_base_``) as well as send and recv, so a kernel name alone made an all_to_all
    two one-sided sends. The kernel's ``correlation`` id names its launch call (thread, time); the
    innermost communication range of that thread holding the launch is the operation: it gives the
    kernel its op type (and is_p2p), and its size and group where the kernel has none. Kernels whose
    launch is not in the trace keep their own names."""
    if launches is None or launches.num_rows == 0 or "_corr" not in comm.column_names:
        return comm
    rows = comm.to_pydict()
    ann = [i for i, src in enumerate(rows["source"]) if src == "kineto:annotation"]
    if not ann:
        return comm
    by_corr = {
        (f, c): (t, ts)
        for f, c, t, ts in zip(
            launches.column("_file").to_pylist(),
            launches.column("corr").to_pylist(),
            launches.column("tid").to_pylist(),
            launches.column("ts_ns").to_pylist(),
        )
    }
    ranges: dict[tuple[int, str], list[int]] = {}
    for i in ann:
        ranges.setdefault((rows["_file"][i], rows["_tid"][i]), []).append(i)
    for idx in ranges.values():
        idx.sort(key=lambda i: rows["ts_ns"][i])
    for i, src in enumerate(rows["source"]):
        if src != "kineto:kernel" or rows["_corr"][i] is None:
            continue
        hit = by_corr.get((rows["_file"][i], rows["_corr"][i]))
        if hit is None:
            continue
        tid, t = hit
        inner = None
        for j in ranges.get((rows["_file"][i], tid), ()):
            start = rows["ts_ns"][j]
            if start > t:
                break
            if t < start + (rows["dur_ns"][j] or 0):
                inner = j  # the latest-starting range that holds the launch: the innermost
        if inner is None:
            continue
        rows["op_type"][i] = rows["op_type"][inner]
        rows["is_p2p"][i] = rows["is_p2p"][inner]
        for c in _FROM_LAUNCH:
            if rows[c][i] is None:
                rows[c][i] = rows[c][inner]
    return pa.Table.from_pydict(rows, schema=comm.schema)


def _finish_steps(ctx: ReadContext, staged: dict[str, Staged], late_base: dict[int, int], fl: Files) -> Steps:
    if "steps" not in staged:
        return Steps(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    parts = []
    for b in staged["steps"].batches():
        base = _file_base(b, late_base)
        parts.append(
            pa.table(
                {
                    "step": b.column("step"),
                    "start_ns": _add_base(b.column("start_ns"), base),
                    "end_ns": _add_base(b.column("end_ns"), base),
                    "_file": b.column("_file"),
                }
            )
        )
    t = pa.concat_tables(parts).group_by("step", use_threads=False)
    t = t.aggregate([("start_ns", "min"), ("end_ns", "max"), ("_file", "min")])
    t = t.rename_columns(["step", "start_ns", "end_ns", "_file"]).sort_by("step")
    dur = pc.subtract(t.column("end_ns"), t.column("start_ns"))
    ctx.write(
        "steps",
        {
            "step": t.column("step"),
            "start_ns": t.column("start_ns"),
            "end_ns": t.column("end_ns"),
            "dur_ns": dur,
            "source": pa.repeat(pa.scalar("ProfilerStep"), t.num_rows),
        },
        fl.origin(t),
        fl.paths,
    )
    ok = pc.and_(pc.is_valid(t.column("start_ns")), pc.is_valid(t.column("end_ns")))
    t = t.filter(ok)
    return Steps(*(t.column(c).to_numpy().astype(np.int64) for c in ("step", "start_ns", "end_ns")))


class _OpsIndex:
    """Host ops (file order): thread id, start and end, for naming memory blocks."""

    def __init__(self, rows: Staged, tid: pa.Array, ts: np.ndarray, dur: np.ndarray):
        self.rows, self.tid, self.ts, self.dur = rows, tid, ts, dur


def _finish_operators(ctx: ReadContext, rows: Staged, late_base: dict[int, int], steps: Steps, fl: Files) -> _OpsIndex:
    """Self time and depth need every op of a thread in time order: sort positions with numpy
    (thread, start, longest first, file order), walk them, then stream the staged rows once."""
    keys = rows.columns(["_pid", "tid", "ts_ns", "dur_ns", "_file"])
    ts_arr = _add_base(keys.column("ts_ns").combine_chunks(), _file_base(keys, late_base))
    ts = pc.fill_null(ts_arr, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    dur = pc.fill_null(keys.column("dur_ns"), 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    pid_code = _codes(keys.column("_pid"))
    tid_code = _codes(keys.column("tid"))
    thread = pid_code * (int(tid_code.max(initial=0)) + 2) + tid_code
    order = np.lexsort((-dur, ts, thread))  # stable: file order breaks the remaining ties
    depth_s, self_s = depth_and_self(thread[order], ts[order], dur[order])
    n = len(ts)
    depth = np.empty(n, dtype=np.int32)
    self_ns = np.empty(n, dtype=np.int64)
    depth[order] = depth_s
    self_ns[order] = self_s
    step = steps.of(ts_arr)
    r0 = 0
    for b in rows.batches():
        r1 = r0 + b.num_rows
        ctx.write(
            "operators",
            _with(
                b,
                "operators",
                {
                    "ts_ns": ts_arr.slice(r0, b.num_rows),
                    "step": step.slice(r0, b.num_rows),
                    "self_ns": pa.array(self_ns[r0:r1]),
                    "depth": pa.array(depth[r0:r1]),
                },
            ),
            fl.origin(b, "event_id"),
            fl.paths,
        )
        r0 = r1
    return _OpsIndex(rows, keys.column("tid").combine_chunks(), ts, dur)


def _codes(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer code per distinct value (null = -1... shifted to 0); equal values, equal codes."""
    enc = pc.dictionary_encode(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr)
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def _finish_memory(ctx: ReadContext, rows: Staged, late_base: dict[int, int], ops: _OpsIndex | None, fl: Files) -> None:
    m = pa.Table.from_batches(list(rows.batches()))
    b = m.combine_chunks().to_batches()[0] if m.num_rows else None
    if b is None:
        return
    t_arr = _add_base(b.column("ts_ns"), _file_base(b, late_base))
    order = pa.array(np.argsort(pc.fill_null(t_arr, 0).to_numpy(zero_copy_only=False), kind="stable"))
    allocated = b.column("allocated").take(order)
    if allocated.null_count == len(allocated) and b.column("bytes").null_count < b.num_rows:
        allocated = _allocated_from_deltas(b.column("bytes").take(order), b.column("device").take(order))
        ctx.meta.missing.append(english("missing.kineto.rebuilt_memory"))
    ctx.write(
        "memory_samples",
        {
            "ts_ns": t_arr.take(order),
            "component": pa.repeat(pa.scalar("allocator"), b.num_rows),
            "device": b.column("device").take(order),
            "allocated_bytes": allocated,
            "reserved_bytes": b.column("reserved").take(order),
            "source": pa.repeat(pa.scalar("kineto"), b.num_rows),
        },
        fl.origin(b.take(order), "event_id"),
        fl.paths,
    )
    _finish_operator_memory(ctx, b, t_arr, ops, fl)


def _allocated_from_deltas(nbytes: pa.Array, device: pa.Array) -> pa.Array:
    """Allocated bytes per device as the running sum of the samples' signed sizes (time order),
    shifted so that it never goes below 0: the least the allocator can have held."""
    delta = pc.fill_null(nbytes, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    dev = _codes(device)
    out = np.zeros(len(delta), dtype=np.int64)
    for d in np.unique(dev):
        m = dev == d
        run = np.cumsum(delta[m])
        out[m] = run - min(0, int(run.min()))
    return pa.array(out, pa.int64())


def _finish_operator_memory(
    ctx: ReadContext, b: pa.RecordBatch, t_arr: pa.Array, ops: _OpsIndex | None, fl: Files
) -> None:
    """Pair each allocation with the next event of the same address (a free); name the block after
    the operator that started last on the allocating thread, if it still runs then."""
    keep = np.flatnonzero(
        pc.and_(pc.is_valid(b.column("addr")), pc.and_(pc.is_valid(b.column("bytes")), pc.is_valid(t_arr))).to_numpy(
            zero_copy_only=False
        )
    )
    if not len(keep):
        return
    t = t_arr.to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    nbytes = b.column("bytes").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    addr = b.column("addr").to_numpy(zero_copy_only=False)[keep].astype(np.int64)
    dev = _codes(b.column("device"))[keep]
    eid = b.column("event_id").to_numpy(zero_copy_only=False)[keep]
    o = np.lexsort((eid, t, addr, dev))  # per (device, address) in time order
    nxt = np.full(len(o), -1, dtype=np.int64)
    same = (dev[o][1:] == dev[o][:-1]) & (addr[o][1:] == addr[o][:-1])
    nxt[o[:-1][same]] = o[1:][same]
    allocs = np.flatnonzero(nbytes > 0)
    allocs = allocs[np.argsort(t[allocs], kind="stable")]  # ORDER BY alloc time
    rel = nxt[allocs]
    is_rel = rel >= 0
    is_rel[is_rel] = nbytes[rel[is_rel]] < 0
    rel_rows = np.where(is_rel, keep[np.maximum(rel, 0)], -1)
    rel_take = pa.array(rel_rows, mask=~is_rel)
    alloc_rows = pa.array(keep[allocs])
    t_alloc = t[allocs]
    t_rel = np.where(is_rel, t[np.maximum(rel, 0)], 0)
    names = pa.nulls(len(allocs), pa.string())
    if ops is not None and len(ops.ts):
        names = _op_names_at(ops, b.column("tid").take(alloc_rows), t_alloc)
    ctx.write(
        "operator_memory",
        {
            "name": names,
            "size_bytes": pa.array(nbytes[allocs]),
            "alloc_ns": pa.array(t_alloc),
            "release_ns": pa.array(t_rel, mask=~is_rel),
            "duration_ns": pa.array(t_rel - t_alloc, mask=~is_rel),
            "alloc_allocated_bytes": b.column("allocated").take(alloc_rows),
            "alloc_reserved_bytes": b.column("reserved").take(alloc_rows),
            "release_allocated_bytes": b.column("allocated").take(rel_take),
            "release_reserved_bytes": b.column("reserved").take(rel_take),
            "device": b.column("device").take(alloc_rows),
        },
        fl.origin(b.take(alloc_rows), "event_id"),
        fl.paths,
    )


def _op_names_at(ops: _OpsIndex, tid: pa.Array, t: np.ndarray) -> pa.Array:
    """Name of the op that started last at or before ``t`` on the same thread (ties: the innermost),
    if it still runs at ``t``; null otherwise."""
    n_ops = len(ops.ts)
    codes = pc.dictionary_encode(pa.concat_arrays([ops.tid.cast(pa.string()), tid.cast(pa.string())])).indices
    codes = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    op_code, mem_code = codes[:n_ops], codes[n_ops:]
    by = np.lexsort((-ops.dur, ops.ts, op_code))
    code_s, ts_s = op_code[by], ops.ts[by]
    end_s = ts_s + ops.dur[by]
    match = np.full(len(t), -1, dtype=np.int64)
    for c in np.unique(mem_code).tolist():
        if c < 0:
            continue
        lo, hi = np.searchsorted(code_s, c, "left"), np.searchsorted(code_s, c, "right")
        if lo == hi:
            continue
        rows = np.flatnonzero(mem_code == c)
        pos = lo + np.searchsorted(ts_s[lo:hi], t[rows], side="right") - 1
        ok = pos >= lo
        pos, rows = pos[ok], rows[ok]
        running = end_s[pos] >= t[rows]
        match[rows[running]] = by[pos[running]]
    if not (match >= 0).any():
        return pa.nulls(len(t), pa.string())
    names = ops.rows.columns(["name"]).column("name")
    return names.take(pa.array(match, mask=match < 0)).combine_chunks()


def _default_group(metas: list[dict[str, Any]]) -> tuple[str, list[int]] | None:
    """The only process group of a job (gloo annotations carry no group): (name, ranks)."""
    for meta in metas:
        dist = meta.get("distributedInfo")
        if isinstance(dist, dict):
            pgs = dist.get("pg_config")
            if isinstance(pgs, list) and len(pgs) == 1 and isinstance(pgs[0], dict):
                ranks = pgs[0].get("ranks")
                if isinstance(ranks, list):
                    return str(pgs[0].get("pg_name", "0")), [int(r) for r in ranks]
            ws = dist.get("world_size")
            if isinstance(ws, int) and pgs is None:
                return "0", list(range(ws))
    return None


def _write_groups(
    ctx: ReadContext, picker: KinetoPicker, metas: list[dict[str, Any]], default: tuple[str, list[int]] | None
) -> None:
    """The process groups the trace names, and the default group its collectives without one were
    given (``_default_group``), so that every table of the run knows the same groups."""
    groups = dict(picker.groups)
    backend = None
    for meta in metas:
        dist = meta.get("distributedInfo")
        if not isinstance(dist, dict):
            continue
        backend = backend or dist.get("backend")
        for pg in dist.get("pg_config") or []:
            if not isinstance(pg, dict):
                continue
            name = str(pg.get("pg_name", ""))
            g = groups.setdefault(name, {"group_name": name})
            g.setdefault("group_id", pg.get("pg_desc"))
            if g.get("group_id") is None:
                g["group_id"] = pg.get("pg_desc")
            if g.get("global_ranks") is None and isinstance(pg.get("ranks"), list):
                g["global_ranks"] = [int(r) for r in pg["ranks"]]
            g["backend"] = pg.get("backend_config") or backend
    if default is not None and default[0] not in groups:
        groups[default[0]] = {
            "group_name": default[0],
            "global_ranks": default[1],
            "source": "distributedInfo.world_size",
        }
    if not groups:
        return
    rows = []
    for g in groups.values():
        ranks = g.get("global_ranks")
        desc = g.get("group_id")
        rows.append(
            {
                "group_name": g["group_name"],
                "group_id": desc,
                "pg_name": desc,
                "global_ranks": ranks,
                "local_rank": ranks.index(ctx.rank) if ranks and ctx.rank in ranks else None,
                "backend": g.get("backend") or backend,
                "source": g.get("source")
                or ("distributedInfo.pg_config" if g.get("backend") else "record_param_comms"),
            }
        )
    ctx.write("comm_groups", rows)


def _fill_meta(ctx: ReadContext, router: KinetoPicker, metas: list[dict[str, Any]]) -> None:
    m = ctx.meta
    dist = next((x.get("distributedInfo") for x in metas if isinstance(x.get("distributedInfo"), dict)), None)
    if dist and isinstance(dist.get("world_size"), int):
        m.world_size = dist["world_size"]
    host = next((x.get("host_name") for x in metas if x.get("host_name")), None)
    m.hostname = host
    schema_v = next((x.get("schemaVersion") for x in metas if x.get("schemaVersion") is not None), None)
    m.producer_version = f"kineto schema {schema_v}" if schema_v is not None else None
    flags = {
        k: metas[0].get(k)
        for k in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
        if metas and k in metas[0]
    }
    m.config = flags or None
    m.extra = {
        "distributedInfo": dist,
        "deviceProperties": next((x.get("deviceProperties") for x in metas if x.get("deviceProperties")), None),
        "trace_id": next((x.get("trace_id") for x in metas if x.get("trace_id")), None),
    }
    w = ctx.writer
    caps = m.capabilities
    ctx.add_table_capabilities()
    if router.has_stacks:
        caps.add("stacks")
    if router.has_shapes:
        caps.add("shapes")
    if not w.has("kernels"):
        m.missing.append(english("missing.kineto.cpu_only"))
    if not w.has("memory_samples"):
        m.missing.append(english("missing.kineto.no_memory"))
    if not router.has_stacks:
        m.missing.append(english("missing.kineto.no_stacks"))
    if not router.has_shapes:
        m.missing.append(english("missing.kineto.no_shapes"))
    if not w.has("steps"):
        m.missing.append(english("missing.kineto.no_steps"))
    if not w.has("comm_ops"):
        m.missing.append(english("missing.kineto.no_comm"))
    m.missing.append(english("missing.kineto.no_matrix"))


def check_rank(ctx: ReadContext, path: Path, meta: dict[str, Any], outcome: Any) -> None:
    """A warning when the trace's own rank is not the one its folder gave the collection."""
    dist = meta.get("distributedInfo")
    if (
        isinstance(dist, dict)
        and isinstance(dist.get("rank"), int)
        and dist["rank"] != ctx.rank
        and ctx.plan.rank_source in ("sidecar", "rank_dir")
    ):
        outcome.warn(problem("rank_mismatch", field="distributedInfo.rank", found=dist["rank"], rank=ctx.rank))
