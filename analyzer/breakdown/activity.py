"""What each rank was busy with, per step: the activity intervals every time breakdown starts from.

Two kinds of ranks:

``device`` ranks (the rank has rows in ``kernels``: torch_npu / MindSpore / msprof tasks, Kineto GPU
kernels). The accelerator is the resource:

- *compute*: device tasks that are not communication and not memory copies/sets
  (``kernels.is_communication`` false, ``core_type`` not ``*memcpy*``/``*memset*``);
- *communication*: communication tasks (``kernels.is_communication``: HCCL ops, NCCL kernels);
  when a rank has no communication task but has ``comm_ops`` rows, those ranges are used;
- *memory*: memory copies and sets (GPU ``gpu_memcpy`` / ``gpu_memset``);
- *receive*: the communication intervals whose op type is ``recv`` (``hcom_receive``): the
  pipeline bubble.

``host`` ranks (no device task: a CPU-only Kineto trace, e.g. gloo training). The CPU threads of
the process are the resource:

- *compute*: the host operators on any thread — Kineto ``cpu_op`` (aten and other dispatcher ops),
  every operator of other producers (MindSpore ``CPU OP`` kernels) — except the communication
  calls below (union of intervals, so nested operators count once);
- *communication*: the ``comm_ops`` ranges (``gloo:*`` / ``nccl:*`` record_function ranges, which
  on gloo run on the ``pt_gloo_runloop`` threads while the data moves and the rank waits for its
  peers), the dispatcher's communication calls (``c10d::*``, ``record_param_comms``) on the
  calling thread, and operators that are ``comm_ops`` rows themselves (MindSpore ``AllReduce``);
- *receive*: the ``comm_ops`` ranges of type ``recv`` (``gloo:recv``: a pipeline stage waiting
  for its input); no memory intervals.

Step attribution: a task belongs to the step given by its producer (torch_npu ``Step Id``), else,
for Kineto GPU kernels, to the host step in which it was *launched* (``cudaLaunchKernel`` and
friends, matched by ``correlation`` id: the device may run a step's kernels after the host step
ended), else to the host step its start falls in (host operators and communication ops without a
step too: MindSpore on CPU, whose step comes from the collector's sidecar).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..vocabulary import COMM_CALL_SQL, MEMORY_TASK_PATTERN
from . import intervals as iv


@dataclass
class StepActivity:
    """Interval sets of one (rank, step)."""

    compute: iv.Intervals = field(default_factory=iv.empty)
    comm: iv.Intervals = field(default_factory=iv.empty)
    memory: iv.Intervals = field(default_factory=iv.empty)
    receive: iv.Intervals = field(default_factory=iv.empty)
    # the HCCL *tasks* (the small ops on the ``Plane`` lanes: Memcpy, Reduce_Inline, Notify_Wait ...)
    # of the step, for producers that define Communication as their union (``step_breakdown``)
    comm_tasks: iv.Intervals = field(default_factory=iv.empty)

    def busy(self) -> iv.Intervals:
        return iv.merge(self.compute, self.comm, self.memory)


@dataclass
class RankActivity:
    rank: int
    mode: str  # "device" | "host"
    steps: dict[int, tuple[int, int]]  # host step ranges: step -> (start_ns, end_ns); may be empty
    by_step: dict[int | None, StepActivity]
    # a device rank whose files hold no device task (kernel_details.csv / the db's task tables not
    # copied): its compute and idle time cannot be computed from events
    no_tasks: bool = False


# producers that profile an NPU: a rank of theirs is a device rank even when its task files are missing
DEVICE_PRODUCERS = ("torch_npu_text", "torch_npu_db", "torch_npu_raw", "msprof")


HOST_STEPS_SQL = """
    WITH s AS (
      SELECT *, bool_or(source <> 'collector') OVER (PARTITION BY rank) AS has_profiler
      FROM steps WHERE run = $run AND step IS NOT NULL)
    SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM s WHERE source <> 'collector' OR NOT has_profiler
    GROUP BY rank, step ORDER BY rank, step
"""

# device tasks with the step they belong to (see the module doc for the attribution rule): for
# Kineto kernels the host step of their launch, which needs their slices' correlation ids
_DEVICE_TASKS_SQL = """
        WITH k AS (
          SELECT rank, collection_id, kernel_id, step, name, core_type, ts_ns, ts_ns + dur_ns AS end_ns,
                 coalesce(is_communication, false) AS is_comm
          FROM kernels WHERE run = $run AND dur_ns > 0),
        kin AS (SELECT collection_id FROM collections WHERE run = $run AND producer = 'kineto'),
        ks AS (
          SELECT s.rank, s.collection_id, s.event_id AS kernel_id,
                 TRY_CAST(json_extract(s.args, '$.correlation') AS BIGINT) AS corr
          FROM slices s
          WHERE s.run = $run AND s.collection_id IN (SELECT collection_id FROM kin)
            AND s.category IN ('kernel', 'Kernel', 'gpu_memcpy', 'Memcpy', 'gpu_memset', 'Memset')),
        launch AS (
          SELECT s.rank, s.collection_id, TRY_CAST(json_extract(s.args, '$.correlation') AS BIGINT) AS corr,
                 min(s.ts_ns) AS launch_ns
          FROM slices s
          WHERE s.run = $run AND s.collection_id IN (SELECT collection_id FROM kin)
            AND s.category IN ('cuda_runtime', 'cuda_driver', 'Runtime')
          GROUP BY ALL),
        hs AS (SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
               FROM steps WHERE run = $run AND step IS NOT NULL GROUP BY rank, step),
        ls AS (
          SELECT ks.rank, ks.collection_id, ks.kernel_id, min(hs.step) AS launch_step
          FROM ks JOIN launch l ON l.rank = ks.rank AND l.collection_id = ks.collection_id AND l.corr = ks.corr
          JOIN hs ON hs.rank = ks.rank AND l.launch_ns >= hs.start_ns AND l.launch_ns < hs.end_ns
          GROUP BY ALL)
        SELECT k.rank, coalesce(ls.launch_step, k.step) AS step, k.name, k.core_type, k.ts_ns, k.end_ns, k.is_comm
        FROM k LEFT JOIN ls ON ls.rank = k.rank AND ls.collection_id = k.collection_id AND ls.kernel_id = k.kernel_id
"""


def _comm_tasks(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int]) -> pa.Table:
    """HCCL tasks of device ranks: the slices of the communication ``Plane`` lanes (torch_npu
    trace_view.json / db ``COMMUNICATION_TASK_INFO`` + ``TASK``, msprof); no step of their own."""
    return con.sql(
        """
        SELECT s.rank, CAST(NULL AS INTEGER) AS step, s.ts_ns, s.ts_ns + s.dur_ns AS end_ns
        FROM slices s JOIN lanes l ON l.run = s.run AND l.rank = s.rank AND l.collection_id = s.collection_id
                                  AND l.pid = s.pid AND l.tid = s.tid
        WHERE s.run = $run AND list_contains($ranks, s.rank) AND s.dur_ns > 0
          AND l.lane_group = 'communication' AND l.lane ILIKE 'plane %'
        """,
        params={"run": run, "ranks": ranks},
    ).to_arrow_table()


def _host_ops(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int]) -> pa.Table:
    """Host operators of CPU-only ranks: Kineto ``cpu_op`` / ``Operator`` rows (its other categories,
    ``user_annotation`` and ``python_function``, are annotations and call stacks, not work), every
    operator row of other producers (MindSpore ``CPU OP``, ...). ``is_comm``: a communication call
    (dispatcher names, or the same op as a ``comm_ops`` row of the rank: MindSpore ``AllReduce``)."""
    return con.sql(
        f"""
        WITH o AS (
          SELECT o.* FROM operators o JOIN collections c ON c.run = o.run AND c.collection_id = o.collection_id
          WHERE o.run = $run AND o.dur_ns > 0 AND o.ts_ns IS NOT NULL AND list_contains($ranks, o.rank)
            AND (c.producer <> 'kineto' OR o.category IN ('cpu_op', 'Operator'))),
        cm AS (SELECT DISTINCT rank, name, ts_ns FROM comm_ops WHERE run = $run AND list_contains($ranks, rank))
        SELECT o.rank, o.step, o.name, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns,
               ({COMM_CALL_SQL.replace("name", "o.name")} OR cm.rank IS NOT NULL) AS is_comm
        FROM o LEFT JOIN cm ON cm.rank = o.rank AND cm.name = o.name AND cm.ts_ns = o.ts_ns
        """,
        params={"run": run, "ranks": ranks},
    ).to_arrow_table()


class _Rows:
    """Rows of a query as numpy columns, each converted once (nullable integers: NULL as 0, with
    ``valid`` saying which are set)."""

    def __init__(self, tbl: pa.Table):
        self.n = tbl.num_rows
        self.tbl = tbl
        self._cols: dict[tuple[str, str], Any] = {}

    def _get(self, kind: str, col: str) -> Any:
        key = (kind, col)
        if key not in self._cols:
            c = self.tbl[col]
            if kind == "ints":
                self._cols[key] = pc.fill_null(c, 0).to_numpy().astype(np.int64)
            elif kind == "valid":
                self._cols[key] = pc.is_valid(c).to_numpy(zero_copy_only=False)
            elif kind == "bools":
                self._cols[key] = pc.fill_null(c, False).to_numpy(zero_copy_only=False).astype(bool)
            else:
                self._cols[key] = c.to_pylist()
        return self._cols[key]

    def ints(self, col: str) -> np.ndarray:
        return self._get("ints", col)

    def valid(self, col: str) -> np.ndarray:
        return self._get("valid", col)

    def bools(self, col: str) -> np.ndarray:
        return self._get("bools", col)

    def texts(self, col: str) -> list[str | None]:
        return self._get("texts", col)


def _arrow(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> _Rows:
    return _Rows(con.sql(sql, params=params).to_arrow_table())


@dataclass
class _Part:
    """Intervals of one kind of a rank, with their step (``valid`` False: none from the producer)."""

    step: np.ndarray
    valid: np.ndarray
    ts: np.ndarray
    end: np.ndarray

    @staticmethod
    def concat(parts: list[_Part]) -> _Part:
        return _Part(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("step", "valid", "ts", "end")))


def _part(rows: _Rows, mask: np.ndarray, step: str | None = "step") -> _Part:
    n = int(mask.sum())
    if step is None:
        return _Part(np.zeros(n, np.int64), np.zeros(n, bool), rows.ints("ts_ns")[mask], rows.ints("end_ns")[mask])
    return _Part(rows.ints(step)[mask], rows.valid(step)[mask], rows.ints("ts_ns")[mask], rows.ints("end_ns")[mask])


def _receive(op_types: list[str | None] | None, names: list[str | None], rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` are receives: op type ``recv``, else (op type unknown) a name that normalises to it."""
    from ..vocabulary import normalize_op_type

    out = np.zeros(len(names), dtype=bool)
    for i in np.flatnonzero(rows).tolist():
        o = op_types[i] if op_types is not None else None
        out[i] = o == "recv" if o is not None else normalize_op_type(names[i]) == "recv"
    return out


def load(
    con: duckdb.DuckDBPyConnection, run: str, ranks: list[int] | None = None, tables: set[str] | None = None
) -> dict[int, RankActivity]:
    """Activity intervals of every rank of a run (or of the given ranks), grouped by step; tasks
    outside every step are kept under step ``None`` only when the rank has no steps at all.
    ``tables``: the fact tables on ``con`` that hold rows (None: any may), the others are not
    queried (the ingest knows which files a collection wrote: ``ingest.aggregate``)."""

    def has(*names: str) -> bool:
        return tables is None or all(t in tables for t in names)

    params = {"run": run}
    steps = _arrow(con, HOST_STEPS_SQL, params) if has("steps") else None
    cols = _arrow(con, "SELECT rank, collection_id, producer, capabilities FROM collections WHERE run = $run", params)
    producers = cols.texts("producer")
    kernels = None
    if has("kernels"):
        kernels = _arrow(
            con,
            "SELECT rank, step, name, core_type, ts_ns, ts_ns + dur_ns AS end_ns, dur_ns, "
            "coalesce(is_communication, false) AS is_comm FROM kernels WHERE run = $run",
            params,
        )
    kernel_ranks = set(kernels.ints("rank").tolist()) if kernels is not None else set()
    tasks = None
    if kernels is not None and kernels.n:
        if "kineto" in producers:
            tasks = _arrow(con, _DEVICE_TASKS_SQL, params)  # the launch step of each Kineto kernel
        else:
            keep = kernels.valid("dur_ns") & (kernels.ints("dur_ns") > 0)
            tasks = _Rows(kernels.tbl.filter(pa.array(keep)))
    comm_ops = None
    if has("comm_ops"):
        comm_ops = _arrow(
            con,
            "SELECT rank, step, name, op_type, ts_ns, ts_ns + dur_ns AS end_ns FROM comm_ops "
            "WHERE run = $run AND dur_ns > 0 AND ts_ns IS NOT NULL",
            params,
        )
    step_ranks = steps.ints("rank") if steps is not None else np.zeros(0, np.int64)
    task_ranks = tasks.ints("rank") if tasks is not None else np.zeros(0, np.int64)
    op_ranks = comm_ops.ints("rank") if comm_ops is not None else np.zeros(0, np.int64)
    all_ranks = set(step_ranks.tolist()) | set(task_ranks.tolist()) | set(op_ranks.tolist())
    if ranks is not None:
        all_ranks &= set(ranks)
    caps = cols.tbl["capabilities"].to_pylist()
    device_made = {
        r
        for r, p, c in zip(cols.ints("rank").tolist(), producers, caps)
        if p in DEVICE_PRODUCERS or "step_trace" in (c or [])
    }
    no_tasks = (device_made - kernel_ranks) & all_ranks
    device_ranks = sorted((set(task_ranks.tolist()) | no_tasks) & all_ranks)
    host_ranks = sorted(all_ranks - set(device_ranks))
    ops = _Rows(_host_ops(con, run, host_ranks)) if host_ranks and has("operators") else None
    hccl = _Rows(_comm_tasks(con, run, device_ranks)) if device_ranks and has("slices", "lanes") else None

    if tasks is not None:
        core = pc.utf8_lower(pc.fill_null(tasks.tbl["core_type"], ""))
        task_mem = pc.match_substring_regex(core, MEMORY_TASK_PATTERN).to_numpy(zero_copy_only=False)
        task_comm = tasks.bools("is_comm")
        task_recv = _receive(None, tasks.texts("name"), task_comm & np.isin(task_ranks, device_ranks))
    if comm_ops is not None:
        op_types = comm_ops.texts("op_type")
        op_recv = np.array([t == "recv" for t in op_types], dtype=bool)  # host ranks: the op type only
        device_ops = np.isin(op_ranks, device_ranks)
        op_recv_named = _receive(op_types, comm_ops.texts("name"), device_ops) if device_ops.any() else op_recv
    out: dict[int, RankActivity] = {}
    for rank in sorted(all_ranks):
        if steps is not None:
            m = step_ranks == rank
            host = dict(
                zip(
                    steps.ints("step")[m].tolist(),
                    zip(steps.ints("start_ns")[m].tolist(), steps.ints("end_ns")[m].tolist()),
                )
            )
        else:
            host = {}
        parts: dict[str, _Part] = {}
        if rank in device_ranks:
            mode = "device"
            if tasks is not None:
                mine = task_ranks == rank
                parts["compute"] = _part(tasks, mine & ~task_comm & ~task_mem)
                parts["memory"] = _part(tasks, mine & ~task_comm & task_mem)
                parts["comm"] = _part(tasks, mine & task_comm)
                parts["receive"] = _part(tasks, mine & task_comm & task_recv)
            if (tasks is None or not parts["comm"].ts.size) and comm_ops is not None:
                mine = op_ranks == rank
                parts["comm"] = _part(comm_ops, mine)
                parts["receive"] = _part(comm_ops, mine & op_recv_named)
            if hccl is not None:
                parts["comm_tasks"] = _part(hccl, hccl.ints("rank") == rank, step=None)
        else:
            mode = "host"
            comm: list[_Part] = []
            if ops is not None:
                mine = ops.ints("rank") == rank
                is_comm = ops.bools("is_comm")
                parts["compute"] = _part(ops, mine & ~is_comm)
                comm.append(_part(ops, mine & is_comm))
            if comm_ops is not None:
                mine = op_ranks == rank
                comm.append(_part(comm_ops, mine))
                parts["receive"] = _part(comm_ops, mine & op_recv)
            if comm:
                parts["comm"] = _Part.concat(comm)
        out[rank] = RankActivity(
            rank=rank, mode=mode, steps=host, by_step=_by_step(parts, host), no_tasks=rank in no_tasks
        )
    return out


def _by_step(parts: dict[str, _Part], host: dict[int, tuple[int, int]]) -> dict[int | None, StepActivity]:
    """Each part's intervals per step: its producer's step, else the host step its start falls in;
    outside every step only when the rank has none."""
    by_step: dict[int | None, StepActivity] = {}
    has_steps = bool(host)
    if has_steps:
        order = sorted(host, key=lambda s: host[s][0])
        st_step = np.array(order, dtype=np.int64)
        starts = np.array([host[s][0] for s in order], dtype=np.int64)
        ends = np.array([host[s][1] for s in order], dtype=np.int64)
    for name, p in parts.items():
        if not p.ts.size:
            continue
        step, valid = p.step, p.valid
        if has_steps and not valid.all():  # no step from the producer: the step its start is in
            k = np.searchsorted(starts, p.ts, side="right") - 1
            ok = (k >= 0) & (p.ts < ends[np.maximum(k, 0)])
            step = np.where(valid, step, st_step[np.maximum(k, 0)])
            valid = valid | ok
        keyed = np.flatnonzero(valid)
        keyed = keyed[np.argsort(step[keyed], kind="stable")]
        cuts = np.flatnonzero(np.diff(step[keyed])) + 1
        for rows in np.split(keyed, cuts) if keyed.size else []:
            key = int(step[rows[0]])
            setattr(by_step.setdefault(key, StepActivity()), name, iv.union(p.ts[rows], p.end[rows]))
        if not has_steps and not valid.all():
            m = ~valid
            setattr(by_step.setdefault(None, StepActivity()), name, iv.union(p.ts[m], p.end[m]))
    for s in host:
        by_step.setdefault(int(s), StepActivity())
    return by_step
