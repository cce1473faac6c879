"""Cluster analyses over the store: every function takes a Store and a run and returns a DataFrame.

Definitions follow msprof-analyze (see docs/analyses.md); wall-time categories are interval unions.
"""

from __future__ import annotations

from .clock_alignment import clock_offsets
from .communication import comm_bandwidth, comm_group_totals, comm_matrix, communication_summary
from .slow_rank import slow_rank_evidence, slow_ranks
from .step_breakdown import step_breakdown
from .temporal_breakdown import temporal_breakdown

__all__ = [
    "clock_offsets",
    "comm_bandwidth",
    "comm_group_totals",
    "comm_matrix",
    "communication_summary",
    "slow_rank_evidence",
    "slow_ranks",
    "step_breakdown",
    "temporal_breakdown",
]
