"""Cluster analyses over the store: every function takes a Store and a run name (default: the most
recently ingested run) and returns a pandas DataFrame; each is also a table ``analysis.<name>`` of
`analyze query` (views.py). Definitions follow msprof-analyze; wall-time categories are interval
unions (docs/analyses.md).

| function | one row per |
|---|---|
| ``step_breakdown(store, run, ranks)`` | (rank, step): Computing, Communication(Not Overlapped), Overlapped, Communication, Free, Preparing, Stage, Bubble (ns) |
| ``temporal_breakdown(store, run, steps, ranks)`` | device rank: HTA's idle / compute / non-compute |
| ``communication_summary(store, run)`` | (rank, communication op): group, instance, elapsed, wait, transit, bytes, bandwidth |
| ``comm_bandwidth(store, run)`` | (rank, op, transport): bytes, transit, bandwidth |
| ``comm_matrix(store, run)`` | (group, op type, global src, global dst, transport) link |
| ``comm_group_totals(store, run)`` | communication group |
| ``slow_ranks(store, run)`` / ``slow_rank_evidence`` | rank: votes / convicting collective |
| ``slow_links(store, run)`` / ``slow_link_evidence`` | judged bandwidth set / evidence row |
| ``parallel_dims(store, run)`` / ``parallel_layout`` / ``layout_metric`` | parallel dimension / rank with its coordinates (+ a metric) |
| ``clock_offsets(store, run)`` | rank: clock offset to the reference rank, residual, warning |
| ``advise(store, run)`` | finding: rule, severity, numbers, evidence |
"""

from __future__ import annotations

from .advisor import advise
from .clock_alignment import clock_offsets
from .communication import comm_bandwidth, comm_group_totals, comm_matrix, communication_summary
from .parallel_layout import layout_metric, parallel_dims, parallel_layout
from .slow_link import slow_link_evidence, slow_links
from .slow_rank import slow_rank_evidence, slow_ranks
from .step_breakdown import step_breakdown
from .temporal_breakdown import temporal_breakdown

__all__ = [
    "advise",
    "clock_offsets",
    "comm_bandwidth",
    "comm_group_totals",
    "comm_matrix",
    "communication_summary",
    "layout_metric",
    "parallel_dims",
    "parallel_layout",
    "slow_link_evidence",
    "slow_links",
    "slow_rank_evidence",
    "slow_ranks",
    "step_breakdown",
    "temporal_breakdown",
]
