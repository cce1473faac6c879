"""Clock alignment across ranks: each rank's clock offset, estimated from many collectives.

Hosts' clocks differ (by minutes, in MindStudio Insight's FAQ). All members of a blocking
collective (all-reduce, all-gather, reduce-scatter, all-to-all, barrier) leave it together, so the
end of one collective instance is one instant seen through every member's clock:

    end[r, i] = T[i] + offset[r] + noise

1. *Coarse*: offset[r] = median over the steps both ranks profiled of (step start on r − step
   start on the reference rank). Handles skews of seconds or minutes; good to a few ms.
2. Collectives are matched across ranks by (group, step, op type, size, order within the step)
   (``collectives``; gloo groups are attributed after the coarse correction).
3. *Fine*: alternate T[i] = median over members of (end − offset) and offset[r] = median over the
   rank's instances of (end − T[i]), with the reference rank (the lowest) fixed at 0.

Reported per rank: ``offset_ns`` (subtract it from the rank's timestamps to put them on the
reference clock), ``residual_ns`` (median |end − offset − T| over its instances: how well the
collectives agree after correction), ``residual_p90_ns``, ``n_collectives`` used, and a
``warning`` when the rank cannot be aligned (too few matched collectives, no path to the reference
rank, or residuals above ``max_residual_ns``).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from ..messages import message, render
from ..store import Store
from . import activity, collectives
from .cache import per_run

BLOCKING = collectives.BLOCKING
MIN_COLLECTIVES = 3
MAX_RESIDUAL_NS = 1_000_000
COLUMNS = [
    "rank",
    "offset_ns",
    "residual_ns",
    "residual_p90_ns",
    "n_collectives",
    "coarse_offset_ns",
    "status",
    "warning",
    "warning_msg",  # the warning as a message of analyzer.messages (shown in the reader's language)
]


def coarse_offsets(steps: pd.DataFrame, ref: int) -> tuple[dict[int, int], dict[int, int]]:
    """Per rank: median difference of step starts to the reference rank, and its spread (MAD)."""
    offs: dict[int, int] = {}
    spread: dict[int, int] = {}
    base = steps[steps["rank"] == ref].set_index("step")["start_ns"]
    for rank, g in steps.groupby("rank"):
        d = (g.set_index("step")["start_ns"] - base).dropna()
        if rank == ref or d.empty:
            offs[int(rank)], spread[int(rank)] = 0, 0
            continue
        med = int(np.median(d.to_numpy(np.int64)))
        offs[int(rank)] = med
        spread[int(rank)] = int(np.median(np.abs(d.to_numpy(np.int64) - med)))
    return offs, spread


def fit_offsets(ends: pd.DataFrame, ref: int, init: dict[int, int], iterations: int = 30) -> dict[int, int]:
    """Robust fit of end[r, i] = T[i] + offset[r] (columns: instance, rank, end_ns). On arrays: the
    per-instance and per-rank medians are pandas' (float64, the mean of the two middle values)."""
    ranks, by_rank = np.unique(ends["rank"].to_numpy(np.int64), return_inverse=True)
    by_instance = pd.factorize(ends["instance"])[0]
    end = ends["end_ns"].to_numpy(np.int64)
    end = end - int(end.min()) if len(end) else end  # medians are float64: keep the numbers small
    off = {int(r): int(init.get(int(r), 0)) for r in ranks}
    off[ref] = 0
    for _ in range(iterations):
        corr = end - np.array([off[int(r)] for r in ranks], dtype=np.int64)[by_rank]
        t = _group_medians(corr.astype(np.float64), by_instance)[by_instance]
        med = np.round(_group_medians(end - t, by_rank)).astype(np.int64)
        new = {int(r): int(v) for r, v in zip(ranks, med, strict=True)}
        shift = new.get(ref, 0)
        new = {r: v - shift for r, v in new.items()}
        if all(abs(new[r] - off.get(r, 0)) < 100 for r in new):
            off = new
            break
        off = new
    return off


def _group_medians(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The median of ``values`` per group code 0..n-1 (every code present), as pandas' groupby
    median computes it: the middle value, or the mean of the two middle ones."""
    order = np.lexsort((values, codes))
    v = values[order]
    counts = np.bincount(codes)
    starts = np.cumsum(counts) - counts
    lo = v[starts + (counts - 1) // 2]
    hi = v[starts + counts // 2]
    return (lo + hi) / 2


@dataclass(frozen=True)
class Alignment:
    """Clock offsets of a run and its collectives matched with them (gloo groups attributed after
    correcting every rank's clock)."""

    ranks: list[int]
    ref: int | None
    coarse: dict[int, int]
    offsets: dict[int, int]
    ops: pd.DataFrame  # ``collectives.instances`` columns
    members: dict[str, tuple[int, ...]]


def align(
    con: duckdb.DuckDBPyConnection,
    run: str,
    steps: pd.DataFrame | None = None,
    groups: pd.DataFrame | None = None,
) -> Alignment:
    """Coarse offsets from step starts, collectives matched with them, the fine fit, and the
    collectives re-matched with the fine offsets (twice). The comm ops are read once; the host
    steps (``activity.host_steps``) and the groups (``collectives.load_groups``) too, unless given."""
    steps = activity.host_steps(con, run) if steps is None else steps
    raw = collectives.load_ops(con, run)
    groups = collectives.load_groups(con, run) if groups is None else groups
    ranks = sorted(
        {int(r) for r in steps["rank"]}
        | {int(r) for r in con.execute("SELECT DISTINCT rank FROM comm_ops WHERE run = ?", [run]).df()["rank"]}
    )

    last: list = []  # (attributed ops, their instances, members) of the previous match

    def match(offsets: dict[int, int] | None, tol: int) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
        ops = collectives.attribute_groups(raw, groups, offsets, tol)
        if last and last[0].equals(ops):  # the same attribution (the usual refit): the same instances
            return last[1], last[2]
        members = collectives.group_members(groups, ops)
        last[:] = [ops, collectives.match_instances(ops, members), members]
        return last[1], last[2]

    if not ranks:
        ops, members = match(None, collectives.DEFAULT_TOLERANCE_NS)
        return Alignment([], None, {}, {}, ops, members)
    ref = ranks[0]
    coarse, spread = coarse_offsets(steps, ref) if not steps.empty else ({}, {})
    tol = collectives.DEFAULT_TOLERANCE_NS + 3 * max(spread.values(), default=0)
    ops, members = match(coarse, tol)
    off = dict(coarse)
    needs_attribution = bool(raw["group_name"].isna().any())
    for _ in range(2):  # refit, then re-attribute gloo groups with the fine offsets and refit
        ends = _blocking_ends(ops)
        if not ends.empty:
            off = fit_offsets(ends, ref, off)
        if needs_attribution:
            ops, members = match(off, collectives.DEFAULT_TOLERANCE_NS)
    checked = collectives.verify_by_time(ops, off)
    if not checked["instance"].equals(ops["instance"]):  # some calls were paired again: refit on them
        ends = _blocking_ends(checked)
        if not ends.empty:
            off = fit_offsets(ends, ref, off)
    return Alignment(ranks, ref, coarse, off, checked, members)


@per_run
def run_alignment(store: Store, run: str) -> Alignment:
    """``align`` for a run, cached per run content (treat the result as read-only)."""
    steps, groups = activity.run_host_steps(store, run), collectives.run_groups(store, run)
    with store.read_connection(run=run) as con:
        return align(con, run, steps, groups)


def run_instances(store: Store, run: str) -> tuple[pd.DataFrame, dict[str, tuple[int, ...]]]:
    """Every comm op of a run matched into instances (``collectives.instances``), gloo groups
    attributed after correcting every rank's clock with the fitted offsets (collectives are matched
    by group, op, size and order, never by time, so the fit needs no attribution first); a copy.
    Without the correction a rank whose clock is off by seconds overlaps no one."""
    al = run_alignment(store, run)
    return al.ops.copy(), dict(al.members)


@per_run
def clock_offsets(store: Store, run: str | None = None, max_residual_ns: int = MAX_RESIDUAL_NS) -> pd.DataFrame:
    """One row per rank: clock offset to the reference (lowest) rank, residual, and a warning when
    the rank cannot be aligned."""
    al = run_alignment(store, run)
    if not al.ranks:
        return pd.DataFrame(columns=COLUMNS)
    ranks, ref, coarse, off, ops = al.ranks, al.ref, al.coarse, al.offsets, al.ops
    ends = _blocking_ends(ops)
    rows = []
    for rank in ranks:
        mine = ends[ends["rank"] == rank]
        n = int(mine["instance"].nunique())
        status, warning = ("reference", None) if rank == ref else ("aligned", None)
        res_med = res_p90 = None
        if n:
            corr = ends["end_ns"] - int(ends["end_ns"].min()) - ends["rank"].map(lambda r: off.get(int(r), 0))
            t = corr.groupby(ends["instance"]).transform("median")
            res = (corr - t)[ends["rank"] == rank].abs()
            res_med, res_p90 = int(res.median()), int(res.quantile(0.9))
        if rank != ref:
            if n < MIN_COLLECTIVES:
                status = "not aligned"
                rough = message("clock.coarse", ms=coarse.get(rank, 0) / 1e6) if rank in coarse else ""
                warning = message("clock.not_aligned", rank=rank, n=n, need=MIN_COLLECTIVES, coarse=rough)
            elif res_med is not None and res_med > max_residual_ns:
                status = "poorly aligned"
                warning = message("clock.poorly_aligned", rank=rank, ms=res_med / 1e6)
        rows.append(
            {
                "rank": rank,
                "offset_ns": 0 if rank == ref else (off.get(rank) if status != "not aligned" else None),
                "residual_ns": res_med,
                "residual_p90_ns": res_p90,
                "n_collectives": n,
                "coarse_offset_ns": coarse.get(rank),
                "status": status,
                "warning": None if warning is None else render(warning),
                "warning_msg": warning,
            }
        )
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("offset_ns", "residual_ns", "residual_p90_ns", "coarse_offset_ns"):
        df[c] = df[c].astype("Int64")
    return df


def _blocking_ends(ops: pd.DataFrame) -> pd.DataFrame:
    ok = (
        ops["instance"].notna()
        & ~ops["is_p2p"]
        & ops["op_type"].isin(BLOCKING)
        & (ops["n_seen"] >= 2)
        & (ops["n_seen"] == ops["n_members"])
    )
    return ops.loc[ok, ["instance", "rank", "end_ns"]].reset_index(drop=True)
