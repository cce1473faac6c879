"""Slow links: bandwidth that deviates from its peers, with the rows that convict.

Two levels, both with msprof-analyze's threshold (its advisor's ``slow link`` rule: a gap of more
than 5 % between the best and the worst relative to the mean):

- ``rank``: per step, communication group and transport (HCCS, RDMA, SDMA, ... or the backend for
  Kineto), each member's bandwidth = bytes / transit time summed over its ops of the group; when
  (max − min) / mean > 5 % the member with the lowest bandwidth is slow on that transport (sets
  moving less than 1 MiB per rank are latency-bound and not judged; Kineto
  transit times are estimated per instance, identical for all members: no rank is ever slow there);
- ``link``: per group, op type and transport, each link of the communication matrix (global src →
  dst, summed over steps) that moves at least 1 MiB per step (the rank level's floor); a link below
  the median of its peers by more than 5 % is slow.

``slow_links`` returns one row per judged set (slow or not); ``slow_link_evidence`` the rows behind
the slow ones (per-op bandwidth of the slow rank, or the slow link itself).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import Store
from .cache import per_run
from .communication import BANDWIDTH_COLUMNS, MATRIX_COLUMNS, comm_bandwidth, comm_matrix

RATIO_THRESHOLD = 0.05
MIN_BYTES = 1 << 20  # below 1 MiB per rank a transfer is latency-bound: its "bandwidth" says nothing
COLUMNS = [
    "level",
    "step",
    "group_name",
    "op_type",
    "transport",
    "n",
    "mean_bytes_per_s",
    "min_bytes_per_s",
    "max_bytes_per_s",
    "gap_ratio",
    "slow",
    "slow_rank",
    "slow_src",
    "slow_dst",
    "fast_rank",
]
EVIDENCE_COLUMNS = list(
    dict.fromkeys(BANDWIDTH_COLUMNS + MATRIX_COLUMNS + ["median_bytes_per_s", "below_median", "level", "reason"])
)
_SKIP_TRANSPORTS = {"LOCAL"}


def judge_rank_bandwidth(per_rank: pd.DataFrame) -> list[dict]:
    """Rows (step, group_name, transport, rank, bandwidth_bytes_per_s) -> one judgement per
    (step, group, transport): the members of a group run the same collectives, so their
    bandwidths are comparable."""
    out = []
    for (step, group, transport), g in per_rank.groupby(["step", "group_name", "transport"], dropna=False):
        bw = g["bandwidth_bytes_per_s"].astype(float)
        if len(g) < 2 or not np.isfinite(bw).all() or float(g["bytes"].min()) < MIN_BYTES:
            continue
        mean = float(bw.mean())
        gap = (float(bw.max()) - float(bw.min())) / mean if mean else 0.0
        slow = gap > RATIO_THRESHOLD
        out.append(
            {
                "level": "rank",
                "step": step,
                "group_name": group,
                "op_type": None,
                "transport": transport,
                "n": len(g),
                "mean_bytes_per_s": mean,
                "min_bytes_per_s": float(bw.min()),
                "max_bytes_per_s": float(bw.max()),
                "gap_ratio": gap,
                "slow": slow,
                "slow_rank": int(g.loc[bw.idxmin(), "rank"]) if slow else None,
                "slow_src": None,
                "slow_dst": None,
                "fast_rank": int(g.loc[bw.idxmax(), "rank"]),
            }
        )
    return out


def judge_links(links: pd.DataFrame) -> tuple[list[dict], pd.DataFrame]:
    """Matrix links -> one judgement per (group, op type, transport); slow = more than 5 % below the median."""
    out, bad = [], []
    per_step = links["bytes"].astype("float64") / links["steps"].astype("float64").clip(lower=1)
    ok = links[
        links["bandwidth_bytes_per_s"].notna()
        & ~links["transport"].isin(_SKIP_TRANSPORTS)
        & per_step.ge(MIN_BYTES)  # the rank-level floor: below it a link's "bandwidth" is latency
    ]
    for (group, op, transport), g in ok.groupby(["group_name", "op_type", "transport"], dropna=False):
        if len(g) < 3:
            continue
        bw = g["bandwidth_bytes_per_s"].astype(float)
        med = float(bw.median())
        low = g[bw < (1 - RATIO_THRESHOLD) * med]
        worst = g.loc[bw.idxmin()]
        out.append(
            {
                "level": "link",
                "step": None,
                "group_name": group,
                "op_type": op,
                "transport": transport,
                "n": len(g),
                "mean_bytes_per_s": float(bw.mean()),
                "min_bytes_per_s": float(bw.min()),
                "max_bytes_per_s": float(bw.max()),
                "gap_ratio": (med - float(bw.min())) / med if med else 0.0,
                "slow": not low.empty,
                "slow_rank": None,
                "slow_src": _int(worst["src_rank"] if pd.notna(worst["src_rank"]) else worst["src_local"])
                if not low.empty
                else None,
                "slow_dst": _int(worst["dst_rank"] if pd.notna(worst["dst_rank"]) else worst["dst_local"])
                if not low.empty
                else None,
                "fast_rank": None,
            }
        )
        if not low.empty:
            bad.append(low.assign(median_bytes_per_s=med, below_median=1 - low["bandwidth_bytes_per_s"] / med))
    return out, (pd.concat(bad, ignore_index=True) if bad else pd.DataFrame())


def _int(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _per_rank(bw: pd.DataFrame) -> pd.DataFrame:
    bw = bw[~bw["transport"].isin(_SKIP_TRANSPORTS) & bw["transit_ns"].gt(0) & bw["bytes"].notna()]
    g = bw.groupby(["step", "group_name", "transport", "rank"], dropna=False).agg(
        bytes=("bytes", "sum"), transit_ns=("transit_ns", "sum")
    )
    g = g.reset_index()
    g["bandwidth_bytes_per_s"] = g["bytes"].astype(float) / g["transit_ns"].astype(float) * 1e9
    return g


@per_run
def slow_link_analysis(store: Store, run: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(judgements, evidence)."""
    bw = comm_bandwidth(store, run)
    per_rank = _per_rank(bw)
    rows = judge_rank_bandwidth(per_rank)
    link_rows, bad_links = judge_links(comm_matrix(store, run))
    rows += link_rows
    judged = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("step", "n", "slow_rank", "slow_src", "slow_dst", "fast_rank"):
        judged[c] = pd.to_numeric(judged[c], errors="coerce").astype("Int64")
    evidence = []
    for r in judged[judged["slow"] & (judged["level"] == "rank")].itertuples():
        ops = bw[(bw["rank"] == r.slow_rank) & (bw["transport"] == r.transport) & (bw["group_name"] == r.group_name)]
        ops = ops[ops["step"].isna()] if pd.isna(r.step) else ops[ops["step"] == r.step]
        evidence.append(ops.assign(level="rank", reason=f"lowest {r.transport} bandwidth of step {r.step}"))
    if not bad_links.empty:
        evidence.append(bad_links.assign(level="link", reason="more than 5 % below the median of its peers"))
    ev = pd.concat(evidence, ignore_index=True) if evidence else pd.DataFrame(columns=EVIDENCE_COLUMNS)
    return judged, ev


@per_run
def slow_links(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per judged (step, transport) across ranks and per (group, op type, transport) across
    links: spread of the bandwidth, ``slow`` and who is slow."""
    return slow_link_analysis(store, run)[0]


def slow_link_evidence(store: Store, run: str | None = None) -> pd.DataFrame:
    """The per-op bandwidth rows of each slow rank on its transport, and the slow links."""
    return slow_link_analysis(store, run)[1]
