"""The analyses as SQL tables: ``analyze query "SELECT * FROM analysis.step_breakdown"``.

Each name of ``VIEWS`` is a table of the ``analysis`` schema in `analyze query`; a query computes
only the analyses it names, for the ``--run`` given or for every run of the store (the ``run``
column says which), with the same functions, columns and units as ``analyze report --json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pandas as pd
import pyarrow as pa

from ..errors import QueryError
from ..format import json_ready
from ..store import Store
from .advisor import advise
from .clock_alignment import clock_offsets
from .communication import comm_bandwidth, comm_group_totals, comm_matrix, communication_summary
from .parallel_layout import layout_metric, parallel_dims, parallel_layout
from .slow_link import slow_link_evidence, slow_links
from .slow_rank import slow_rank_evidence, slow_ranks
from .step_breakdown import step_breakdown
from .temporal_breakdown import temporal_breakdown

SCHEMA = "analysis"

Analysis = Callable[[Store, str], pd.DataFrame]

VIEWS: dict[str, tuple[Analysis, str]] = {
    "step_breakdown": (
        step_breakdown,
        "One row per (rank, step): Computing, Communication(Not Overlapped), "
        "Overlapped, Communication, Free, Preparing, Stage, Bubble in ns (msprof-analyze definitions).",
    ),
    "temporal_breakdown": (temporal_breakdown, "One row per device rank: HTA's idle / compute / non-compute time."),
    "communication": (
        communication_summary,
        "One row per (rank, communication op): group, instance, elapsed, wait, transit, bytes, bandwidth.",
    ),
    "comm_bandwidth": (comm_bandwidth, "One row per (rank, op, transport): bytes, transit time, bandwidth (B/s)."),
    "comm_matrix": (
        comm_matrix,
        "One row per link (group, op type, global src -> dst rank, transport): bytes, time, bandwidth.",
    ),
    "communication_groups": (comm_group_totals, "One row per communication group: ranks, ops, time, bytes."),
    "slow_ranks": (
        slow_ranks,
        "One row per rank: slow-rank votes (msprof-analyze: the shortest wait in an outlying collective).",
    ),
    "slow_rank_evidence": (slow_rank_evidence, "One row per convicting collective: every member's elapsed time."),
    "slow_links": (slow_links, "One row per judged bandwidth set: the slow rank or link and its deviation."),
    "slow_link_evidence": (slow_link_evidence, "One row per evidence row of a slow link."),
    "parallel_dims": (parallel_dims, "One row per inferred parallel dimension (DP/TP/PP/CP/EP): size, groups, stride."),
    "parallel_layout": (parallel_layout, "One row per rank: its coordinate in each inferred parallel dimension."),
    "layout_metric": (
        lambda store, run: layout_metric(store, run, "step_ns", "mean"),
        "parallel_layout with each rank's mean step time (step_ns).",
    ),
    "clock_offsets": (clock_offsets, "One row per rank: clock offset to the reference rank, residual, warning."),
    "advice": (
        advise,
        "One row per advisor finding: rule, severity, title, detail, ranks, value, threshold, evidence.",
    ),
}

_STRING = re.compile(r"'(?:[^']|'')*'")
_REF = re.compile(rf'\b{SCHEMA}\s*\.\s*"?([A-Za-z_][A-Za-z0-9_]*)"?', re.IGNORECASE)


def referenced(sql: str) -> list[str]:
    """The analysis tables a query names (``analysis.<name>``), in order; an unknown name is an error."""
    names: list[str] = []
    for m in _REF.finditer(_STRING.sub("''", sql)):  # not inside string literals
        name = m.group(1).lower()
        if name not in VIEWS:
            raise QueryError(
                f"no analysis table {SCHEMA}.{name}; there are: " + ", ".join(f"{SCHEMA}.{n}" for n in VIEWS)
            )
        if name not in names:
            names.append(name)
    return names


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """A frame as an Arrow table; an object column Arrow cannot take as it is (dicts keyed by rank,
    mixed values) goes as plain JSON data (string keys), or failing that as JSON text."""
    cols = {}
    for c in df.columns:
        values = df[c]
        try:
            cols[str(c)] = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            plain = [json_ready(v) for v in values]
            try:
                cols[str(c)] = pa.array(plain)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                cols[str(c)] = pa.array([None if v is None else json.dumps(v, default=str) for v in plain], pa.string())
    return pa.table(cols) if cols else pa.table({"run": pa.array([], pa.string())})


def analysis_tables(store: Store, sql: str, run: str | None = None) -> dict[str, pa.Table]:
    """``{"analysis.<name>": table}`` for every analysis the query names, over ``run`` or every run
    (a ``run`` column first)."""
    names = referenced(sql)
    if not names:
        return {}
    runs = [run] if run is not None else sorted(map(str, store.load_catalog(["runs"])["runs"]["run"].to_pylist()))
    out: dict[str, pa.Table] = {}
    for name in names:
        fn = VIEWS[name][0]
        parts = []
        for r in runs:
            df = fn(store, r)
            parts.append(
                df.drop(columns=["run"], errors="ignore").assign(run=r)[["run", *[c for c in df.columns if c != "run"]]]
            )
        out[f"{SCHEMA}.{name}"] = to_arrow(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"run": []}))
    return out
