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
"""

from __future__ import annotations

import pandas as pd

from ..store import Store
from . import activity
from . import intervals as iv
from .cache import per_run

COLUMNS = [
    "rank",
    "step",
    "step_ns",
    "computing_ns",
    "comm_not_overlapped_ns",
    "overlapped_ns",
    "communication_ns",
    "free_ns",
    "preparing_ns",
    "stage_ns",
    "bubble_ns",
    # extras (after the fixed interface columns)
    "comm_not_overlapped_excl_receive_ns",
    "memory_not_overlapped_ns",
    "device_start_ns",
    "device_end_ns",
    "host_start_ns",
    "host_end_ns",
    "mode",
]

_INT_COLS = [c for c in COLUMNS if c.endswith("_ns")]


def breakdown_row(
    rank: int, step: int | None, sa: activity.StepActivity, host: tuple[int, int] | None, mode: str
) -> dict:
    """The breakdown of one (rank, step) from its interval sets."""
    comp, comm, mem = sa.compute, sa.comm, sa.memory
    computing = iv.total(comp)
    communication = iv.total(comm)
    overlapped = iv.total(iv.intersect(comp, comm))
    cm = iv.merge(comp, comm)
    mem_no = iv.total(iv.subtract(mem, cm))
    busy = iv.merge(cm, mem)
    sp = iv.span(busy)
    device_span = (sp[1] - sp[0]) if sp else 0
    free = device_span - iv.total(busy)
    bubble = iv.total(sa.receive)
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
    }


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in _INT_COLS:
        df[c] = df[c].astype("Int64")
    df["rank"] = df["rank"].astype("int64")
    df["step"] = df["step"].astype("Int64")
    return df.sort_values(["rank", "step"], na_position="first").reset_index(drop=True)


@per_run
def step_breakdown(store: Store, run: str | None = None, ranks: list[int] | None = None) -> pd.DataFrame:
    """One row per (rank, step): msprof-analyze's step trace columns, integer nanoseconds.

    Columns: rank, step, step_ns, computing_ns, comm_not_overlapped_ns, overlapped_ns,
    communication_ns, free_ns, preparing_ns, stage_ns, bubble_ns, then the extras
    comm_not_overlapped_excl_receive_ns, memory_not_overlapped_ns, device_start_ns / device_end_ns
    (the busy span), host_start_ns / host_end_ns (the host step), mode (device | host).
    ``run`` defaults to the most recently ingested run; ``ranks`` restricts the ranks read.
    """
    acts = activity.run_activity(store, run, ranks)
    rows: list[dict] = []
    for rank, ra in acts.items():
        host = {int(r.step): (int(r.start_ns), int(r.end_ns)) for r in ra.steps.itertuples()}
        for step, sa in ra.by_step.items():
            rows.append(breakdown_row(rank, step, sa, host.get(step) if step is not None else None, ra.mode))
    return frame(rows)
