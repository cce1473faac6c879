"""Cluster analyses over the store: every function takes a Store and a run name (default: the most
recently ingested run) and returns a pandas DataFrame, computed once per content of the run
(``cache.per_run``). Definitions follow msprof-analyze; wall-time categories are interval unions
(docs/analyses.md).

``ANALYSES`` is the one list of them: ``analyze report`` prints its sections in this order, each
is a table ``analysis.<name>`` of `analyze query` (``views``), docs/analyses.md documents each (a
test checks it) and the web app computes them ahead when a run is opened (``webapp.warmup``). A new
analysis is a function in its module and one ``Analysis`` line here.

``COMPARISONS`` lists the analyses of two runs (``analyze diff BASE NEW``): each is a table
``analysis.<name>`` too, computed for the two runs ``analyze query`` names with ``--base`` and
``--new`` (columns ``base_run`` and ``new_run`` first); docs/analyses.md §8 documents each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..store import Store
from . import cache
from .advisor import advise
from .arrivals import arrivals, critical_steps
from .blame import blame_chains, blame_of
from .clock_alignment import clock_offsets
from .comm_rollups import collective_instances, comm_per_rank, rank_pairs, transport_bandwidth
from .communication import comm_bandwidth, comm_group_totals, comm_matrix, communication_summary, group_coverage
from .matching import collective_matching
from .parallel_layout import layout_metric, parallel_dims, parallel_layout
from .pipeline import pipeline, pipeline_stages, send_recv_pairs
from .run_metrics import run_metrics
from .slow_link import slow_link_evidence, slow_links
from .slow_rank import slow_rank_evidence, slow_ranks
from .step_breakdown import step_breakdown
from .step_outliers import step_outliers
from .straggler import stragglers
from .temporal_breakdown import temporal_breakdown
from .trend import trend

if TYPE_CHECKING:
    from .diff import RunDiff, run_diff

# the comparison of two runs is imported when first asked for (``__getattr__``): `analyze report` and
# a page of one run never use it
_LATER = {"RunDiff": ".diff", "run_diff": ".diff"}


def __getattr__(name: str) -> Any:
    if name in _LATER:
        import importlib

        return getattr(importlib.import_module(_LATER[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


LAYOUT_METRIC = "step_ns"  # the per-rank metric of the layout grid (mean over steps)


@dataclass(frozen=True)
class Analysis:
    """One analysis of a run: ``compute(store, run)``; ``doc`` says what one row is."""

    name: str  # the report section, the JSON key and the table analysis.<name>
    compute: Callable[[Store, str], pd.DataFrame]
    doc: str


def _layout_metric(store: Store, run: str) -> pd.DataFrame:
    return layout_metric(store, run, LAYOUT_METRIC, "mean")


ANALYSES: dict[str, Analysis] = {
    a.name: a
    for a in (
        Analysis(
            "step_breakdown",
            step_breakdown,
            "One row per (rank, step): Computing, Communication(Not Overlapped), "
            "Overlapped, Communication, Free, Preparing, Stage, Bubble in ns (msprof-analyze definitions).",
        ),
        Analysis(
            "temporal_breakdown",
            temporal_breakdown,
            "One row per device rank: HTA's idle / compute / non-compute time.",
        ),
        Analysis(
            "communication_groups", comm_group_totals, "One row per communication group: ranks, ops, time, bytes."
        ),
        Analysis(
            "communication",
            communication_summary,
            "One row per (rank, communication op): group, instance, elapsed, wait, transit, bytes, bandwidth.",
        ),
        Analysis(
            "comm_bandwidth", comm_bandwidth, "One row per (rank, op, transport): bytes, transit time, bandwidth (B/s)."
        ),
        Analysis(
            "comm_matrix",
            comm_matrix,
            "One row per link (group, op type, global src -> dst rank, transport): bytes, time, bandwidth.",
        ),
        Analysis(
            "group_coverage",
            group_coverage,
            "One row per communication group of two or more ranks: its members and those profiled in the run.",
        ),
        Analysis(
            "comm_per_rank",
            comm_per_rank,
            "One row per rank: communication ops, elapsed, wait, transit (producer's or estimated), bytes.",
        ),
        Analysis(
            "transport_bandwidth",
            transport_bandwidth,
            "One row per (rank, transport): bytes, transit, bandwidth over the ops, min / max over single ops.",
        ),
        Analysis(
            "rank_pairs",
            rank_pairs,
            "One row per (source, destination) rank pair summed over groups, op types, steps: bytes, time, bandwidth.",
        ),
        Analysis(
            "collective_instances",
            collective_instances,
            "One row per collective instance (a call matched across its ranks): elapsed spread, slowest rank.",
        ),
        Analysis(
            "collective_matching",
            collective_matching,
            "One row per communication group: ops, instances matched across ranks, incomplete ones, and why not.",
        ),
        Analysis(
            "stragglers",
            stragglers,
            "One row per rank: named straggler or not (arrival order), its cause and operators, what-if gain, "
            "msprof-analyze's vote.",
        ),
        Analysis(
            "critical_steps",
            critical_steps,
            "One row per step: the rank that set its length and how much shorter it would be at the median time.",
        ),
        Analysis(
            "blame_chains",
            blame_chains,
            "One row per late collective: who arrived last, by how much, why (vs its peers), whom it waited for.",
        ),
        Analysis(
            "arrivals",
            arrivals,
            "One row per member of a matched collective: entry on the reference clock, lateness, last, margin.",
        ),
        Analysis(
            "slow_ranks",
            slow_ranks,
            "One row per rank: slow-rank votes (msprof-analyze: the shortest wait in an outlying collective).",
        ),
        Analysis(
            "slow_rank_evidence", slow_rank_evidence, "One row per convicting collective: every member's elapsed time."
        ),
        Analysis(
            "slow_links", slow_links, "One row per judged bandwidth set: the slow rank or link and its deviation."
        ),
        Analysis("slow_link_evidence", slow_link_evidence, "One row per evidence row of a slow link."),
        Analysis(
            "parallel_dims",
            parallel_dims,
            "One row per inferred parallel dimension (DP/TP/PP/CP/EP): size, groups, stride.",
        ),
        Analysis(
            "parallel_layout", parallel_layout, "One row per rank: its coordinate in each inferred parallel dimension."
        ),
        Analysis(
            "layout_metric", _layout_metric, f"parallel_layout with each rank's mean step time ({LAYOUT_METRIC})."
        ),
        Analysis(
            "send_recv_pairs",
            send_recv_pairs,
            "One row per send paired with its recv on a neighbouring pipeline stage: ranks, stages, direction, "
            "step, size, both ranges.",
        ),
        Analysis(
            "pipeline",
            pipeline,
            "One row per segment of a pipeline stage's step: forward / backward work of micro-batch k (and its "
            "model chunk in an interleaved pipeline), bubble (blocked in send / recv), from send/recv pairing "
            "without instrumentation.",
        ),
        Analysis(
            "pipeline_stages",
            pipeline_stages,
            "One row per (rank, step) of a pipeline stage: forward / backward micro-batches, their time, bubble "
            "time and share, model chunks per rank when interleaved.",
        ),
        Analysis(
            "clock_offsets", clock_offsets, "One row per rank: clock offset to the reference rank, residual, warning."
        ),
        Analysis(
            "advice",
            advise,
            "One row per advisor finding: rule, severity, title, detail, ranks, value, threshold, evidence.",
        ),
        Analysis(
            "step_outliers",
            step_outliers,
            "One row per step of a rank much longer than its neighbours (collector step times): time, local "
            "median, threshold, profiled or not.",
        ),
        Analysis(
            "run_metrics",
            run_metrics,
            "One row: the run's ranks, steps, producers, collection time, mean step breakdown, peak memory "
            "(over every run: the trend).",
        ),
    )
}

# computed at ingest and stored with the run (``stored``, the catalog's run_results): what a page's
# first view would otherwise compute from every collective or every step of every rank — the step
# breakdown (else read from one file per collection, ~1-2 ms each: 0.4 s of CPU at 256 ranks) of the
# Overview, the Communication page's definitions and the Cluster page's metrics, the Overview's
# straggler card, slow-rank vote, rank picks (the layout) and advice, the Communication page's per-op
# rows (its per-rank, bandwidth and pair roll-ups filter them), links, groups and last arrivals, the
# Cluster page's dimensions and slow links, the timeline's clock offsets, the Training page's
# step-time outliers, the Advisor's findings (advise last: it reads the others). Served while the
# run is unchanged.
STORED_AT_INGEST: tuple[Callable[[Store, str], pd.DataFrame], ...] = (
    step_breakdown,
    arrivals,
    collective_matching,
    slow_ranks,
    stragglers,
    blame_chains,
    communication_summary,
    comm_group_totals,
    comm_bandwidth,
    comm_matrix,
    slow_links,
    parallel_dims,
    parallel_layout,
    clock_offsets,
    step_outliers,
    advise,
)
cache.STORED.update(fn.full_name for fn in STORED_AT_INGEST)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Comparison:
    """One analysis of two runs: ``compute(store, base, new)``; ``doc`` says what one row is."""

    name: str  # the table analysis.<name>
    compute: Callable[[Store, str, str], pd.DataFrame]
    doc: str


def _part(part: str) -> Callable[[Store, str, str], pd.DataFrame]:
    def compute(store: Store, base: str, new: str) -> pd.DataFrame:
        from .diff import run_diff

        return getattr(run_diff(store, base, new), part).copy()

    compute.__name__ = f"diff_{part}"
    return compute


COMPARISONS: dict[str, Comparison] = {
    c.name: c
    for c in (
        Comparison(
            "diff",
            _part("breakdown"),
            "One row per (matched rank or layout class, and total; step breakdown column): base, new, change, "
            "beyond the noise or not.",
        ),
        Comparison(
            "diff_operators",
            _part("operators"),
            "One row per operator / kernel by name and by name + input shapes: calls and time per rank and step "
            "in each run, change, new / vanished.",
        ),
        Comparison(
            "diff_communication",
            _part("communication"),
            "One row per (collective type, group): calls, bytes per call, elapsed / wait / transit per rank and "
            "step, bandwidth, in each run.",
        ),
        Comparison(
            "diff_memory",
            _part("memory"),
            "One row per (matched rank, and total; peak allocated / reserved): base, new, change.",
        ),
        Comparison("diff_stragglers", _part("stragglers"), "One row per slow rank of either run (slow-rank votes)."),
        Comparison(
            "diff_findings",
            _part("findings"),
            "One row per change the verdict names: kind, text, base, new, change.",
        ),
    )
}

__all__ = [
    "ANALYSES",
    "COMPARISONS",
    "Analysis",
    "Comparison",
    "RunDiff",
    "advise",
    "arrivals",
    "blame_chains",
    "blame_of",
    "clock_offsets",
    "collective_instances",
    "collective_matching",
    "comm_bandwidth",
    "comm_group_totals",
    "comm_matrix",
    "comm_per_rank",
    "critical_steps",
    "communication_summary",
    "group_coverage",
    "layout_metric",
    "parallel_dims",
    "send_recv_pairs",
    "parallel_layout",
    "pipeline",
    "pipeline_stages",
    "rank_pairs",
    "run_diff",
    "run_metrics",
    "slow_link_evidence",
    "slow_links",
    "slow_rank_evidence",
    "slow_ranks",
    "step_breakdown",
    "step_outliers",
    "stragglers",
    "temporal_breakdown",
    "transport_bandwidth",
    "trend",
]
