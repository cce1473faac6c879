"""Step time breakdown per rank and step, with msprof-analyze's names and definitions: the rows
``breakdown.rows`` computes (its module text gives every column's definition), stored per
collection by the ingest (``agg_step_breakdown``), as a frame per run."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from ..breakdown.rows import COLUMNS, breakdown_rows, producer_rows
from ..store import Store
from . import activity
from .cache import per_run

_INT_COLS = [c for c in COLUMNS if c.endswith("_ns")]


def frame(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    df = rows[COLUMNS].copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows, columns=COLUMNS)
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
    run = str(run)
    cat = store.catalog_snapshot()
    built, rest = aggregated_ranks(cat, run, ranks)
    parts = [from_aggregates(store, run, built)] if built else []
    if rest or not built:
        parts.append(from_facts(store, run, rest if built else ranks))
    parts = [p for p in parts if not p.empty]
    if len(parts) != 1:
        return frame([]) if not parts else frame(pd.concat(parts, ignore_index=True))
    return parts[0]


# the facts a breakdown is computed from (``activity``): a collection with none adds nothing to its rank's
ACTIVITY_TABLES = ("steps", "kernels", "slices", "comm_ops", "operators", "step_trace")


def aggregated_ranks(cat: dict, run: str, ranks: list[int] | None) -> tuple[list[int], list[int]]:
    """(ranks whose breakdown the ingest stored: the one collection holding their activity has its
    ``agg_step_breakdown`` written; the other ranks of ``ranks``, or of the run when None, whose
    intervals may span collections or were ingested before aggregates were)."""
    ff = cat["fact_files"].to_pandas()
    ff = ff[ff["run"] == run]
    if ranks is not None:
        ff = ff[ff["rank"].isin(list(ranks))]
    active = ff[ff["table_name"].isin(ACTIVITY_TABLES)].groupby("rank")["collection_id"].agg(set)
    done = set(ff.loc[ff["table_name"] == "agg_step_breakdown", "collection_id"])
    built = sorted(int(r) for r, ids in active.items() if len(ids) == 1 and ids <= done)
    rest = sorted({int(r) for r in active.index} - set(built))
    return built, rest


_AGG_COLUMNS = ", ".join(COLUMNS)


def from_aggregates(store: Store, run: str, ranks: list[int]) -> pd.DataFrame:
    """The rows the ingest stored (``agg_step_breakdown``) of ``ranks``."""
    with store.read_connection(run=run, ranks=ranks, tables=["agg_step_breakdown"]) as con:
        tbl = con.sql(
            f"SELECT {_AGG_COLUMNS} FROM agg_step_breakdown WHERE run = $run AND list_contains($ranks, rank)",
            params={"run": run, "ranks": ranks},
        ).to_arrow_table()
    # nullable integers straight to Int64: through float64 a timestamp in ns would lose its last digits
    return frame(tbl.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int64Dtype()}.get))


def from_facts(store: Store, run: str, ranks: list[int] | None = None) -> pd.DataFrame:
    """The breakdown computed from the facts (intervals of every task), what the aggregates hold."""
    acts = activity.run_activity(store, run, ranks)
    if not acts:
        return frame([])
    with store.read_connection(run=run) as con:
        return frame(breakdown_rows(acts, producer_rows(con, str(run), list(acts))))
