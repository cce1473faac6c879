"""Step time breakdown per rank and step, with msprof-analyze's names and definitions.

Reproduces the columns of torch_npu's ``step_trace_time.csv`` / msprof-analyze's
``cluster_step_trace_time.csv`` from the events, with interval unions (see ``activity`` for what
counts as compute and communication on device and on CPU-only ranks). For one (rank, step):

- ``computing_ns``  = |C|, C = union of compute intervals;
- ``communication_ns`` = |M|, M = union of communication intervals;
- ``overlapped_ns`` = |C ∩ M|;
- ``comm_not_overlapped_ns`` = |M| − |C ∩ M|  ("Communication(Not Overlapped)");
- ``memory_not_overlapped_ns`` = |memory copies outside C ∪ M| (GPU memcpy/memset; 0 on NPU);
- the step's *device span* runs from the first to the last busy instant (C ∪ M ∪ memory) of the step;
- ``free_ns`` = device span − |C ∪ M ∪ memory|: the device idles between tasks;
- ``bubble_ns`` = |R|, R = union of receive intervals (pipeline ``hcom_receive``);
- ``stage_ns`` = device span − bubble;
- ``comm_not_overlapped_excl_receive_ns`` = comm_not_overlapped − bubble;
- ``preparing_ns`` = first busy instant − host step start (time the host spends before the device
  gets its first task; NULL without host steps);
- ``step_ns`` = host step duration (ProfilerStep / STEP_TIME), else the device span.

So ``computing + comm_not_overlapped + memory_not_overlapped + free = stage + bubble``, and, as in
torch_npu, ``step_ns`` ≈ ``preparing + stage + bubble`` plus the host tail after the last task.

A device rank whose files hold no device task (only ``step_trace_time.csv`` and the communication
files copied, a big ``kernel_details.csv`` dropped) cannot have its Computing or Free computed from
events: its rows are the producer's own (``step_trace``, ``mode`` = ``producer``; ``step_ns`` = the
host step when known, else Preparing + Stage + Bubble), and without a producer row its device columns
are NULL (``mode`` = ``no tasks``) — never a zero that reads as an idle device.

**Which communication.** Producer versions differ on what Communication is: the torch_npu
versions whose parser we read (``TraceStepTimeDbParser``, 2024 and 2025; the text export's
``Overlap Analysis``) take the union of the HCCL *op* spans (``COMMUNICATION_OP``, the
``Group N Communication`` lane); other torch_npu db exports take the union of the HCCL *tasks*
(``COMMUNICATION_TASK_INFO`` + ``TASK``, the ``Plane`` lanes), a few % shorter: the gaps between
an op's tasks are not counted. Nothing in an export names its definition and no version number
tells it, so the producer's own row decides: where a rank has both the tasks and the producer's
``step_trace`` rows, the definition whose Communication is the closer to the producer's, summed
over the rank's steps, is used for every column of that rank (``communication_definition``:
``op spans`` | ``task union``); without the producer's rows, op spans (``host ranges`` on CPU
ranks). The producer's own Communication is kept beside ours (``producer_communication_ns``),
and the task union whenever the export has the tasks (``communication_tasks_ns``).
"""

from __future__ import annotations

import duckdb

from . import activity
from . import intervals as iv

PARTS = [  # a step's parts, in the fixed interface's order
    "computing_ns",
    "comm_not_overlapped_ns",
    "overlapped_ns",
    "communication_ns",
    "free_ns",
    "preparing_ns",
    "stage_ns",
    "bubble_ns",
]
COLUMNS = [
    "rank",
    "step",
    "step_ns",
    *PARTS,
    # extras (after the fixed interface columns)
    "comm_not_overlapped_excl_receive_ns",
    "memory_not_overlapped_ns",
    "device_start_ns",
    "device_end_ns",
    "host_start_ns",
    "host_end_ns",
    "mode",
    "communication_definition",
    "communication_tasks_ns",
    "producer_communication_ns",
]

OP_SPANS, TASK_UNION, HOST_RANGES = "op spans", "task union", "host ranges"


def breakdown_row(
    rank: int,
    step: int | None,
    sa: activity.StepActivity,
    host: tuple[int, int] | None,
    mode: str,
    definition: str | None = None,
) -> dict:
    """The breakdown of one (rank, step) from its interval sets; ``definition`` = ``task union``
    takes the step's HCCL tasks as its communication (see the module doc)."""
    comp, comm, mem = sa.compute, sa.comm, sa.memory
    receive = sa.receive
    if definition == TASK_UNION:
        comm = sa.comm_tasks
        receive = iv.intersect(receive, comm)
    computing = iv.total(comp)
    communication = iv.total(comm)
    overlapped = iv.total(iv.intersect(comp, comm))
    cm = iv.merge(comp, comm)
    mem_no = iv.total(iv.subtract(mem, cm))
    busy = iv.merge(cm, mem)
    sp = iv.span(busy)
    device_span = (sp[1] - sp[0]) if sp else 0
    free = device_span - iv.total(busy)
    bubble = iv.total(receive)
    comm_no = communication - overlapped
    if host is not None:
        step_ns = host[1] - host[0]
        preparing = (sp[0] - host[0]) if sp else None
    else:
        step_ns = device_span
        preparing = None
    return {
        "rank": rank,
        "step": step,
        "step_ns": step_ns,
        "computing_ns": computing,
        "comm_not_overlapped_ns": comm_no,
        "overlapped_ns": overlapped,
        "communication_ns": communication,
        "free_ns": free,
        "preparing_ns": preparing,
        "stage_ns": device_span - bubble,
        "bubble_ns": bubble,
        "comm_not_overlapped_excl_receive_ns": comm_no - bubble,
        "memory_not_overlapped_ns": mem_no,
        "device_start_ns": sp[0] if sp else None,
        "device_end_ns": sp[1] if sp else None,
        "host_start_ns": host[0] if host else None,
        "host_end_ns": host[1] if host else None,
        "mode": mode,
        "communication_definition": definition or (HOST_RANGES if mode == "host" else OP_SPANS),
        "communication_tasks_ns": iv.total(sa.comm_tasks) if sa.comm_tasks[0].size else None,
        "producer_communication_ns": None,
    }


def rows_of(con: duckdb.DuckDBPyConnection, run: str, tables: set[str] | None = None) -> list[dict]:
    """The breakdown rows of every rank on ``con`` (a store connection, or the views over one
    collection's facts the ingest builds its aggregates from: ``analyzer.ingest.aggregate``);
    ``tables``: the fact tables on ``con`` that hold rows (None: any may)."""
    acts = activity.load(con, run, None, tables)
    producer = producer_rows(con, run, list(acts)) if acts and (tables is None or "step_trace" in tables) else []
    return breakdown_rows(acts, producer)


def breakdown_rows(acts: dict[int, activity.RankActivity], producer: list[dict]) -> list[dict]:
    """The rows of every rank's activity (``producer``: the producer's own rows of the ranks)."""
    theirs = {
        (int(r["rank"]), r["step"]): int(r["communication_ns"]) for r in producer if r["communication_ns"] is not None
    }
    rows: list[dict] = []
    for rank, ra in acts.items():
        host = ra.steps
        if ra.no_tasks:
            rows += _rows_without_tasks(rank, ra, host, producer)
            continue
        definition = _definition(rank, ra, theirs) if ra.mode == "device" else None
        for step, sa in ra.by_step.items():
            row = breakdown_row(rank, step, sa, host.get(step) if step is not None else None, ra.mode, definition)
            row["producer_communication_ns"] = theirs.get((rank, step))
            rows.append(row)
    return rows


def _definition(rank: int, ra: activity.RankActivity, theirs: dict[tuple[int, int | None], int]) -> str:
    """``task union`` when the rank's HCCL tasks give a Communication closer to the producer's own
    than the op spans do, summed over its steps with a producer row; else ``op spans``."""
    by_ops = by_tasks = 0
    seen = False
    for step, sa in ra.by_step.items():
        p = theirs.get((rank, step))
        if p is None or not sa.comm_tasks[0].size:
            continue
        seen = True
        by_ops += abs(iv.total(sa.comm) - p)
        by_tasks += abs(iv.total(sa.comm_tasks) - p)
    return TASK_UNION if seen and by_tasks < by_ops else OP_SPANS


_PRODUCER_COLS = [*PARTS, "comm_not_overlapped_excl_receive_ns"]


def producer_rows(con: duckdb.DuckDBPyConnection, run: str, ranks: list[int]) -> list[dict]:
    """The producer's own step rows of the ranks (``step_trace``), NULL as None."""
    return (
        con.sql(
            f"SELECT rank, step, {', '.join(f'max({c}) AS {c}' for c in _PRODUCER_COLS)} FROM step_trace "
            "WHERE run = $run AND list_contains($ranks, rank) GROUP BY rank, step",
            params={"run": run, "ranks": ranks},
        )
        .to_arrow_table()
        .to_pylist()
    )


def _rows_without_tasks(
    rank: int, ra: activity.RankActivity, host: dict[int, tuple[int, int]], producer: list[dict]
) -> list[dict]:
    """A device rank without device tasks: the producer's own rows, else its steps with NULL columns."""
    mine = [r for r in producer if r["rank"] == rank]
    empty = dict.fromkeys(COLUMNS)
    if mine:
        out = []
        for r in mine:
            step = r["step"]
            h = host.get(step) if step is not None else None
            vals = {c: (None if r[c] is None else int(r[c])) for c in _PRODUCER_COLS}
            span = sum(vals[c] or 0 for c in ("preparing_ns", "stage_ns", "bubble_ns"))
            out.append(
                {
                    **empty,
                    **vals,
                    "rank": rank,
                    "step": step,
                    "step_ns": (h[1] - h[0]) if h else span,
                    "host_start_ns": h[0] if h else None,
                    "host_end_ns": h[1] if h else None,
                    "mode": "producer",
                    "communication_definition": "producer",
                    "producer_communication_ns": vals["communication_ns"],
                }
            )
        return out
    steps = list(ra.by_step) or [None]
    return [
        {
            **empty,
            "rank": rank,
            "step": s,
            "step_ns": (host[s][1] - host[s][0]) if s in host else None,
            "host_start_ns": host[s][0] if s in host else None,
            "host_end_ns": host[s][1] if s in host else None,
            "mode": "no tasks",
        }
        for s in steps
    ]
