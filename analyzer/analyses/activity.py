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

import duckdb
import numpy as np
import pandas as pd

from ..store import Store
from ..vocabulary import COMM_CALL_SQL, MEMORY_TASK_PATTERN
from . import intervals as iv
from .cache import per_run


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
    steps: pd.DataFrame  # step, start_ns, end_ns (host step ranges; may be empty)
    by_step: dict[int | None, StepActivity]
    # a device rank whose files hold no device task (kernel_details.csv / the db's task tables not
    # copied): its compute and idle time cannot be computed from events
    no_tasks: bool = False


# producers that profile an NPU: a rank of theirs is a device rank even when its task files are missing
DEVICE_PRODUCERS = ("torch_npu_text", "torch_npu_db", "torch_npu_raw", "msprof")


def device_ranks_without_tasks(con: duckdb.DuckDBPyConnection, run: str) -> set[int]:
    """Ranks recorded by a device producer (or with the producer's own step breakdown) whose
    collections hold no device task: users often copy only the summaries of some ranks."""
    rows = con.execute(
        f"""
        SELECT DISTINCT rank FROM collections
        WHERE run = $run AND (producer IN ({", ".join(f"'{p}'" for p in DEVICE_PRODUCERS)})
                              OR list_contains(capabilities, 'step_trace'))
        EXCEPT SELECT DISTINCT rank FROM kernels WHERE run = $run
        """,
        {"run": run},
    ).fetchall()
    return {int(r) for (r,) in rows}


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> pd.DataFrame:
    return con.execute(sql, params).df()


def host_steps(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """Host step ranges per rank: ProfilerStep / STEP_TIME rows (collector rows only if nothing else)."""
    return _df(
        con,
        """
        WITH s AS (
          SELECT *, bool_or(source <> 'collector') OVER (PARTITION BY rank) AS has_profiler
          FROM steps WHERE run = ? AND step IS NOT NULL)
        SELECT rank, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM s WHERE source <> 'collector' OR NOT has_profiler
        GROUP BY rank, step ORDER BY rank, step
        """,
        [run],
    )


def _device_tasks(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    """Device tasks with the step they belong to (see the module doc for the attribution rule)."""
    sql = """
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
    return con.execute(sql, {"run": run}).df()


def _comm_tasks(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int]) -> pd.DataFrame:
    """HCCL tasks of device ranks: the slices of the communication ``Plane`` lanes (torch_npu
    trace_view.json / db ``COMMUNICATION_TASK_INFO`` + ``TASK``, msprof); no step of their own."""
    if not ranks:
        return pd.DataFrame(columns=["rank", "step", "ts_ns", "end_ns"])
    return con.execute(
        """
        SELECT s.rank, CAST(NULL AS INTEGER) AS step, s.ts_ns, s.ts_ns + s.dur_ns AS end_ns
        FROM slices s JOIN lanes l ON l.run = s.run AND l.rank = s.rank AND l.collection_id = s.collection_id
                                  AND l.pid = s.pid AND l.tid = s.tid
        WHERE s.run = $run AND list_contains($ranks, s.rank) AND s.dur_ns > 0
          AND l.lane_group = 'communication' AND l.lane ILIKE 'plane %'
        """,
        {"run": run, "ranks": ranks},
    ).df()


def _comm_op_ranges(con: duckdb.DuckDBPyConnection, run: str) -> pd.DataFrame:
    return con.execute(
        "SELECT rank, step, name, op_type, ts_ns, ts_ns + dur_ns AS end_ns FROM comm_ops "
        "WHERE run = ? AND dur_ns > 0 AND ts_ns IS NOT NULL",
        [run],
    ).df()


def _host_ops(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int]) -> pd.DataFrame:
    """Host operators of CPU-only ranks: Kineto ``cpu_op`` / ``Operator`` rows (its other categories,
    ``user_annotation`` and ``python_function``, are annotations and call stacks, not work), every
    operator row of other producers (MindSpore ``CPU OP``, ...). ``is_comm``: a communication call
    (dispatcher names, or the same op as a ``comm_ops`` row of the rank: MindSpore ``AllReduce``)."""
    if not ranks:
        return pd.DataFrame(columns=["rank", "step", "name", "ts_ns", "end_ns", "is_comm"])
    return con.execute(
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
        {"run": run, "ranks": ranks},
    ).df()


def step_of(steps: pd.DataFrame, ts: pd.Series) -> pd.Series:
    """The step (of ``steps``: step, start_ns, end_ns) each time falls in, else NA."""
    st = steps.sort_values("start_ns")
    starts, ends = st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
    t = pd.to_numeric(ts, errors="coerce").fillna(-1).to_numpy(np.int64)
    k = np.searchsorted(starts, t, side="right") - 1
    ok = (k >= 0) & (t < ends[np.maximum(k, 0)])
    vals = st["step"].to_numpy()[np.maximum(k, 0)]
    return pd.Series(pd.array(np.where(ok, vals, 0), dtype="Int64"), index=ts.index).where(ok)


def _sets(df: pd.DataFrame) -> iv.Intervals:
    if df.empty:
        return iv.empty()
    return iv.union(df["ts_ns"].to_numpy(np.int64), df["end_ns"].to_numpy(np.int64))


def _is_receive(op_types: pd.Series, names: pd.Series) -> pd.Series:
    from ..vocabulary import normalize_op_type

    if op_types is not None:
        known = op_types.notna()
        out = op_types.eq("recv") & known
        if known.all():
            return out
        return out | (~known & names.map(lambda n: normalize_op_type(n) == "recv"))
    return names.map(lambda n: normalize_op_type(n) == "recv")


def load(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int] | None = None) -> dict[int, RankActivity]:
    """Activity intervals of every rank of a run (or of the given ranks), grouped by step.

    Tasks outside every step are kept under step ``None`` only when the rank has no steps at all.
    """
    steps = host_steps(con, run)
    tasks = _device_tasks(con, run)
    comm_ops = _comm_op_ranges(con, run)
    all_ranks = set(steps["rank"]) | set(tasks["rank"]) | set(comm_ops["rank"])
    if ranks is not None:
        all_ranks &= set(ranks)
    no_tasks = device_ranks_without_tasks(con, run) & all_ranks
    device_ranks = sorted((set(tasks["rank"]) | no_tasks) & all_ranks)
    host_ranks = sorted(all_ranks - set(device_ranks))
    ops = _host_ops(con, run, host_ranks)
    hccl_tasks = _comm_tasks(con, run, device_ranks)
    out: dict[int, RankActivity] = {}
    for rank in sorted(all_ranks):
        st = steps[steps["rank"] == rank][["step", "start_ns", "end_ns"]].reset_index(drop=True)
        has_steps = not st.empty
        if rank in device_ranks:
            t = tasks[tasks["rank"] == rank]
            core = t["core_type"].fillna("").str.lower()
            is_mem = core.str.contains(MEMORY_TASK_PATTERN)
            comp = t[~t["is_comm"] & ~is_mem]
            mem = t[~t["is_comm"] & is_mem]
            comm = t[t["is_comm"]].assign(op_type=None)
            if comm.empty:
                comm = comm_ops[comm_ops["rank"] == rank]
            recv = comm[_is_receive(comm.get("op_type"), comm["name"])] if not comm.empty else comm
            parts = {
                "compute": comp,
                "comm": comm,
                "memory": mem,
                "receive": recv,
                "comm_tasks": hccl_tasks[hccl_tasks["rank"] == rank],
            }
            mode = "device"
        else:
            o = ops[ops["rank"] == rank]
            co = comm_ops[comm_ops["rank"] == rank]
            parts = {
                "compute": o[~o["is_comm"]],
                "comm": pd.concat([o[o["is_comm"]][["step", "ts_ns", "end_ns"]], co[["step", "ts_ns", "end_ns"]]]),
                "memory": o.iloc[0:0],
                "receive": co[co["op_type"] == "recv"],
            }
            mode = "host"
        by_step: dict[int | None, StepActivity] = {}
        for name, df in parts.items():
            if df.empty:
                continue
            if has_steps and df["step"].isna().any():  # no step from the producer: the step its start is in
                df = df.assign(step=df["step"].astype("Int64").fillna(step_of(st, df["ts_ns"])))
            for key, sub in df.groupby(df["step"].astype("Int64"), dropna=False, sort=False):
                k = None if pd.isna(key) else int(key)
                if has_steps and k is None:
                    continue  # outside every step of a rank that has steps
                setattr(by_step.setdefault(k, StepActivity()), name, _sets(sub))
        for s in st["step"]:
            by_step.setdefault(int(s), StepActivity())
        out[rank] = RankActivity(rank=rank, mode=mode, steps=st, by_step=by_step, no_tasks=rank in no_tasks)
    return out


@per_run
def run_activity(store: Store, run: str, ranks: list[int] | None = None) -> dict[int, RankActivity]:
    """``load`` for a run, cached per run content (treat the result as read-only)."""
    with store.read_connection(run=run, ranks=ranks) as con:
        return load(con, run, ranks)
