"""HTA's temporal breakdown per rank, computed from our store (for cross-checks with HTA).

HTA (``TraceAnalysis.get_temporal_breakdown``) looks at all device tasks of a rank (kernels,
memory copies and sets) over the profiled iterations it keeps and reports:

- ``kernel_ns``      = last task end − first task start (HTA "kernel_time");
- ``idle_ns``        = kernel_ns − |union of all tasks|;
- ``compute_ns``     = |union of compute tasks| (not communication, not memory);
- ``non_compute_ns`` = kernel_ns − compute_ns − idle_ns (communication and memory not hidden by compute).

The tasks and their steps come from ``activity`` (the same sets the step breakdown uses), so for a
single step ``compute_ns`` = Computing and ``idle_ns`` = Free of ``step_breakdown``. Device ranks only.

Iterations: by default, as HTA (its trace parser leaves out the last ``ProfilerStep``, often cut
short when the profiler stops), every profiled step of the rank but the last one when the rank has
two or more; a rank with one step (or none) keeps it. ``steps`` overrides that.
"""

from __future__ import annotations

import pandas as pd

from ..breakdown import intervals as iv
from ..store import Store
from . import activity
from .cache import per_run

COLUMNS = [
    "rank",
    "steps",
    "kernel_ns",
    "idle_ns",
    "compute_ns",
    "non_compute_ns",
    "idle_pct",
    "compute_pct",
    "non_compute_pct",
]


@per_run
def temporal_breakdown(
    store: Store, run: str | None = None, steps: list[int] | None = None, ranks: list[int] | None = None
) -> pd.DataFrame:
    """One row per device rank over ``steps`` (default, as HTA: every profiled step of the rank but
    the last one when it has two or more, else all it has)."""
    acts = activity.run_activity(store, run, ranks)
    rows = []
    for rank, ra in acts.items():
        if ra.mode != "device" or ra.no_tasks:  # HTA's breakdown is of device tasks: none in this rank's files
            continue
        if steps is None:
            keys = default_steps(ra)
        else:
            keys = [k for k in ra.by_step if k in steps]
        if not keys:
            continue
        comp = iv.merge(*(ra.by_step[k].compute for k in keys))
        busy = iv.merge(*(ra.by_step[k].busy() for k in keys))
        sp = iv.span(busy)
        if sp is None:
            continue
        kernel = sp[1] - sp[0]
        idle = kernel - iv.total(busy)
        compute = iv.total(comp)
        non_compute = kernel - compute - idle
        rows.append(
            {
                "rank": rank,
                "steps": sorted(k for k in keys if k is not None),
                "kernel_ns": kernel,
                "idle_ns": idle,
                "compute_ns": compute,
                "non_compute_ns": non_compute,
                "idle_pct": round(100 * idle / kernel, 2) if kernel else None,
                "compute_pct": round(100 * compute / kernel, 2) if kernel else None,
                "non_compute_pct": round(100 * non_compute / kernel, 2) if kernel else None,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def default_steps(ra: activity.RankActivity) -> list[int | None]:
    """HTA's iterations of a rank: all profiled steps but the last when there are two or more."""
    numbered = sorted(k for k in ra.by_step if k is not None)
    if len(numbered) >= 2:
        return numbered[:-1]
    return list(ra.by_step)
