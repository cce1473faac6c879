"""Communication summed the ways the web app's communication page shows it, and the CLI can query:
per rank, per (rank, transport), per (source, destination) rank pair, and per collective instance.

Each takes ``ranks`` (None: every rank of the run) and reads only the rows of those ranks: a
collective instance's slowest and fastest rank are those among the ranks asked for. They are quick
sums over the analyses they start from, which are kept per content of the run; they are not kept
themselves (every rank selection would be a new entry).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..format import is_missing
from ..store import Store
from .communication import comm_bandwidth, comm_matrix, communication_summary

PER_RANK_COLUMNS = ["rank", "ops", "elapsed_ns", "wait_ns", "transit_ns", "bytes", "wait_sources"]
TRANSPORT_COLUMNS = [
    "rank",
    "transport",
    "bytes",
    "transit_ns",
    "bandwidth_bytes_per_s",
    "min_bandwidth_bytes_per_s",
    "max_bandwidth_bytes_per_s",
    "ops",
    "source",
]
PAIR_COLUMNS = [
    "src_rank",
    "dst_rank",
    "src_local",
    "dst_local",
    "transport",
    "bytes",
    "transit_ns",
    "bandwidth_bytes_per_s",
]
INSTANCE_COLUMNS = [
    "name",
    "op_type",
    "group_name",
    "pg_name",
    "step",
    "ranks",
    "calls",
    "min_ns",
    "max_ns",
    "avg_ns",
    "slowest_rank",
    "fastest_rank",
    "max_wait_ns",
    "bytes",
    "n_members",
    "wait_source",
    "instance",
]


def _of(df: pd.DataFrame, ranks: Sequence[int] | None, col: str = "rank") -> pd.DataFrame:
    return df if ranks is None else df[df[col].isin(list(ranks))]


def _joined(values: pd.Series) -> str:
    return ", ".join(sorted({str(v) for v in values.dropna()}))


def comm_per_rank(store: Store, run: str | None = None, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per rank: communication ops, elapsed, wait and transit (the producer's, or estimated
    from the matched instances: ``communication_summary``), bytes, where the wait split comes from."""
    s = _of(communication_summary(store, run), ranks)
    if s.empty:
        return pd.DataFrame(columns=PER_RANK_COLUMNS)
    g = s.groupby("rank")
    ops = g.size()
    # one pass over the rows (a Python function per rank's group cost ~0.5 ms each: 0.15 s at 256 ranks)
    sources: dict[int, set[str]] = {}
    for r, v in zip(s["rank"].tolist(), s["wait_source"].tolist()):
        if not is_missing(v):
            sources.setdefault(r, set()).add(str(v))
    return pd.DataFrame(
        {
            "ops": ops,
            "elapsed_ns": g["dur_ns"].sum(),
            "wait_ns": g["wait_ns"].sum(min_count=1),
            "transit_ns": g["transit_ns"].sum(min_count=1),
            "bytes": g["bytes"].sum(min_count=1),
            "wait_sources": pd.Series([sorted(sources.get(r, ())) for r in ops.index.tolist()], index=ops.index),
        }
    ).reset_index()[PER_RANK_COLUMNS]


def transport_bandwidth(store: Store, run: str | None = None, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per (rank, transport) that moved bytes: bytes, transit, bandwidth = bytes / transit,
    min / max over single ops, ops, source (``comm_bandwidth``: the producer's per-transport rows,
    else estimated per op)."""
    b = _of(comm_bandwidth(store, run), ranks)
    b = b[b["transport"].notna()]
    if b.empty:
        return pd.DataFrame(columns=TRANSPORT_COLUMNS)
    b = b.assign(
        bytes=pd.to_numeric(b["bytes"], errors="coerce"),
        transit_ns=pd.to_numeric(b["transit_ns"], errors="coerce"),
        bw=pd.to_numeric(b["bandwidth_bytes_per_s"], errors="coerce"),
    )
    g = b.groupby(["rank", "transport"])
    out = pd.DataFrame(
        {
            "bytes": g["bytes"].sum(min_count=1),
            "transit_ns": g["transit_ns"].sum(min_count=1),
            "min_bandwidth_bytes_per_s": g["bw"].agg(lambda x: x[x > 0].min() if (x > 0).any() else np.nan),
            "max_bandwidth_bytes_per_s": g["bw"].max(),
            "ops": g.size(),
            "source": g["source"].agg(_joined),
        }
    ).reset_index()
    out["bandwidth_bytes_per_s"] = np.where(out["transit_ns"] > 0, out["bytes"] / out["transit_ns"] * 1e9, np.nan)
    return out[out["bytes"].fillna(0) > 0].reset_index(drop=True)[TRANSPORT_COLUMNS]


def rank_pairs(store: Store, run: str | None = None, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per (source, destination) rank pair, summed over groups, op types and steps
    (``comm_matrix``): bytes, transit, bandwidth. A side whose global rank is unknown keeps its
    local rank in the group (``src_local`` / ``dst_local``); ``ranks``: pairs with a known end among them."""
    m = comm_matrix(store, run)
    if m.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    # a side is its global rank, else its local rank in the group
    m = m.assign(
        src_local=m["src_local"].where(m["src_rank"].isna()),
        dst_local=m["dst_local"].where(m["dst_rank"].isna()),
        bytes=pd.to_numeric(m["bytes"], errors="coerce"),
        transit_ns=pd.to_numeric(m["transit_ns"], errors="coerce"),
    )
    if ranks is not None:
        m = m[m["src_rank"].isin(list(ranks)) | m["dst_rank"].isin(list(ranks))]
    g = m.groupby(["src_rank", "dst_rank", "src_local", "dst_local"], dropna=False)
    out = pd.DataFrame(
        {
            "transport": g["transport"].agg(_joined),
            "bytes": g["bytes"].sum(min_count=1),
            "transit_ns": g["transit_ns"].sum(min_count=1),
        }
    ).reset_index()
    out["bandwidth_bytes_per_s"] = np.where(out["transit_ns"] > 0, out["bytes"] / out["transit_ns"] * 1e9, np.nan)
    for c in ("src_rank", "dst_rank", "src_local", "dst_local"):  # group keys come back as float with NaN
        out[c] = pd.to_numeric(out[c], errors="coerce").astype("Int64")
    return out[PAIR_COLUMNS]


def collective_instances(store: Store, run: str | None = None, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per collective instance (one call matched across its ranks, ``collectives``; an op
    without an instance is its own row), slowest first: ranks seen, calls, min / max / mean elapsed,
    slowest and fastest rank, largest wait, bytes, and ``instance``: the key of its rows in
    ``communication_summary`` (NAME#RANK for an op matched to no instance)."""
    s = _of(communication_summary(store, run), ranks)
    if s.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    s = s.assign(
        key=s["instance"]
        .astype(object)
        .where(s["instance"].notna(), s["name"].astype(str) + "#" + s["rank"].astype(str)),
        dur=pd.to_numeric(s["dur_ns"], errors="coerce").astype("float64"),
    )
    g = s.groupby("key", sort=False)
    out = pd.DataFrame(
        {
            "name": g["name"].first(),
            "op_type": g["op_type"].first(),
            "group_name": g["group_name"].first(),
            "pg_name": g["pg_name"].first(),
            "step": g["step"].min(),
            "ranks": g["rank"].nunique(),
            "calls": g.size(),
            "min_ns": g["dur"].min(),
            "max_ns": g["dur"].max(),
            "avg_ns": g["dur"].mean(),
            "slowest_rank": s.loc[g["dur"].idxmax(), "rank"].to_numpy(),
            "fastest_rank": s.loc[g["dur"].idxmin(), "rank"].to_numpy(),
            "max_wait_ns": g["wait_ns"].max(),
            "bytes": g["bytes"].max(),
            "n_members": g["n_members"].max(),
            "wait_source": g["wait_source"].first(),
        }
    ).rename_axis("instance")
    out = out.reset_index()[INSTANCE_COLUMNS]
    return out.sort_values(["max_ns", "name"], ascending=[False, True]).reset_index(drop=True)
