"""Arrival order at the collectives: who arrives late, by how much, and what it costs each step.

msprof-analyze's vote (``slow_rank``) tests each collective's elapsed times for a low outlier,
which needs four members; the arrival order, read here, exists in every group of two or more. For
every collective instance matched across its members (``collectives``), with every member's clock
corrected (``clock_alignment``; ranks that cannot be aligned are left out):

- each member's **entry** = when it called the collective (its dispatcher call, for a range recorded
  by a worker thread; else the op's start) on the reference clock, less the time the rank spent outside
  its profiled steps since its previous collective of the group (a profiler writing one trace per
  step stops the rank for tens of ms between steps: that is the profiler's doing, not the job's);
- **lateness** = entry − the earliest entry; the member with the latest entry **arrived last**, by
  a **margin** = its entry − the next-latest entry: had it arrived with the next-latest member
  ("taken the median time" of its peers), the collective, and so the step, would have started
  ``margin`` earlier. That is the rank's **what-if gain** for that collective (p2p ops are kept in
  the table for the blame chain, not counted in gains);
- per *sample* (a step; each collective when the run has no steps) a rank's gain is the sum of its
  margins there; a step's **critical rank** is the rank with the largest gain, when above its floor.

The **floor** of a rank is the lateness its clock cannot tell from zero or that does not matter:
``CLOCK_FACTOR`` × the clock uncertainty (its median alignment residual plus the other ranks'
median: an error in a rank's offset makes it look late, or early, by that much at every collective)
and at least ``FLOOR_SHARE`` of the median step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..breakdown import intervals as iv
from ..store import Store
from . import activity
from .activity import step_of
from .cache import per_run
from .clock_alignment import clock_offsets, run_alignment

CLOCK_FACTOR = 3.0  # the floor vs the clock uncertainty (alignment residuals)
FLOOR_SHARE = 0.10  # the floor vs the median step time
USABLE_CLOCKS = ("reference", "aligned", "poorly aligned")

ARRIVAL_COLUMNS = [
    "instance",
    "group_name",
    "op_type",
    "is_p2p",
    "name",
    "step",
    "rank",
    "n_members",
    "ts_ns",
    "call_ns",
    "end_ns",
    "entry_ns",
    "untraced_ns",
    "prev_end_ns",
    "lateness_ns",
    "raw_lateness_ns",
    "is_last",
    "margin_ns",
]
STEP_COLUMNS = ["step", "step_ns", "critical_rank", "gain_ns", "second_rank", "second_gain_ns", "floor_ns"]


@dataclass(frozen=True)
class Arrivals:
    """The arrival analysis of a run (treat as read-only)."""

    arrivals: pd.DataFrame  # ARRIVAL_COLUMNS: one row per (instance, member)
    gains: pd.DataFrame  # sample, group_name, rank, gain_ns (every member of every sample, 0 when not last)
    steps: pd.DataFrame  # STEP_COLUMNS
    floors: dict[int, int]  # rank -> floor (ns)
    sample_unit: str  # "step" | "collective" | "none"
    step_ns: float | None  # total profiled step time (median over ranks, summed over steps)
    note: str | None  # why arrivals cannot be compared, when so


def _step_sets(steps: pd.DataFrame) -> dict[int, iv.Intervals]:
    return {
        int(r): iv.union(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64))
        for r, g in steps.groupby("rank")
    }


def _step_start(starts: tuple[np.ndarray, np.ndarray] | None, t: int) -> int | None:
    """Start of the step holding ``t`` (starts, ends sorted by start), or None."""
    if starts is None:
        return None
    k = int(np.searchsorted(starts[0], t, side="right")) - 1
    return int(starts[0][k]) if k >= 0 and t < int(starts[1][k]) else None


def arrival_table(
    ops: pd.DataFrame,
    offsets: dict[int, int],
    step_sets: dict[int, iv.Intervals],
    step_starts: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
    steps: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per member of every complete instance (seen by every profiled member, two or more).
    ``prev_end_ns``: the end of the rank's previous op of the group, else the start of its step."""
    ok = (
        ops["instance"].notna()
        & ops["group_name"].notna()
        & (ops["n_seen"] >= 2)
        & (ops["n_seen"] == ops["n_members"])
        & ops["rank"].isin(list(offsets))
    )
    if not ok.any():
        return pd.DataFrame(columns=ARRIVAL_COLUMNS)
    # the previous op of the same group on the same rank (its own clock): the anchor of "since"
    allg = ops[ops["group_name"].notna()].sort_values(["rank", "ts_ns"], kind="stable")
    prev_end = allg.groupby(["rank", "group_name"])["end_ns"].shift(1)
    a = ops.loc[ok].copy()
    a["prev_end_ns"] = pd.array(prev_end.reindex(a.index), dtype="Int64")
    # the first collective of a group in the trace: since the start of its step on that rank
    first = a["prev_end_ns"].isna()
    if first.any() and step_starts:
        starts = [
            _step_start(step_starts.get(int(r)), int(t)) for r, t in zip(a.loc[first, "rank"], a.loc[first, "ts_ns"])
        ]
        a.loc[first, "prev_end_ns"] = pd.array(starts, dtype="Int64")
    off = a["rank"].map(lambda r: int(offsets[int(r)])).astype("int64")
    # the rank arrives when it calls the collective (``collectives.with_call_times``: a gloo range
    # starts when the worker thread picks the work up, up to tens of ms later on a loaded machine)
    called = a["call_ns"].astype("Int64") if "call_ns" in a else pd.Series(pd.NA, index=a.index, dtype="Int64")
    a["call_ns"] = called
    start = called.fillna(a["ts_ns"].astype("int64")).astype("int64")
    untraced = []
    for r, ts, pe in zip(a["rank"], start, a["prev_end_ns"]):
        sets = step_sets.get(int(r))
        if sets is None or pd.isna(pe) or int(pe) >= int(ts):
            untraced.append(0)
            continue
        untraced.append(iv.total(iv.gaps(sets, int(pe), int(ts))))
    a["untraced_ns"] = np.asarray(untraced, dtype=np.int64)
    raw_entry = start - off
    a["entry_ns"] = raw_entry - a["untraced_ns"]
    g = a.groupby("instance")
    a["lateness_ns"] = a["entry_ns"] - g["entry_ns"].transform("min")
    a["raw_lateness_ns"] = raw_entry - raw_entry.groupby(a["instance"]).transform("min")
    top = g["entry_ns"].transform("max")
    a["is_last"] = False
    last_idx = a.sort_values(["entry_ns", "rank"]).groupby("instance").tail(1).index
    a.loc[last_idx, "is_last"] = True
    second = a.loc[~a["is_last"]].groupby("instance")["entry_ns"].max()
    a["margin_ns"] = np.where(a["is_last"], top - a["instance"].map(second).fillna(top), 0).astype("int64")
    # one step per instance: the step most members put it in (an op without one: its rank's step
    # holding its start, e.g. a step the collector's sidecar gave to a MindSpore folder)
    if a["step"].isna().any() and steps is not None and not steps.empty:
        a["step"] = a["step"].astype("Int64")
        for r, idx in a[a["step"].isna()].groupby("rank").groups.items():
            mine = steps[steps["rank"] == r]
            if not mine.empty:
                a.loc[idx, "step"] = step_of(mine, a.loc[idx, "ts_ns"])
    # (the most frequent, the lowest of a tie; none when no member has one), counted in one grouping
    votes = a.loc[a["step"].notna()].groupby(["instance", "step"]).size().rename("n").reset_index()
    votes = votes.sort_values(["n", "step"], ascending=[False, True], kind="stable").drop_duplicates("instance")
    a["step"] = a["instance"].map(votes.set_index("instance")["step"]).astype("Int64")
    a["end_ns"] = a["end_ns"].astype("int64")
    a["n_members"] = a["n_members"].astype("int64")
    a["prev_end_ns"] = a["prev_end_ns"].astype("Int64")
    return a[ARRIVAL_COLUMNS].sort_values(["entry_ns", "rank"]).reset_index(drop=True)


def _floors(offsets_df: pd.DataFrame, ranks: list[int], step_ns: float | None) -> dict[int, int]:
    res = offsets_df.set_index("rank")["residual_ns"] if not offsets_df.empty else pd.Series(dtype="Int64")
    res = res.astype("float64").fillna(0.0)
    rel = FLOOR_SHARE * step_ns if step_ns else 0.0
    out = {}
    for r in ranks:
        mine = float(res.get(r, 0.0))
        others = res.drop(index=r, errors="ignore")
        clock = CLOCK_FACTOR * (mine + (float(others.median()) if len(others) else 0.0))
        out[r] = int(max(clock, rel))
    return out


def gains_and_steps(
    arrivals: pd.DataFrame, floors: dict[int, int], step_ns: pd.Series
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(per-sample gain of every member in every group, critical rank per step, sample unit)."""
    coll = arrivals[~arrivals["is_p2p"].astype(bool)]
    by_step = bool(coll["step"].notna().any())
    unit = "none" if coll.empty else ("step" if by_step else "collective")
    sample = coll["step"].astype("Int64") if by_step else coll["instance"]
    c = coll.assign(sample=sample)
    if by_step:
        c = c[c["sample"].notna()]
    keys = ["sample", "group_name", "rank"]
    member = c.groupby(keys).size().rename("n").reset_index()[keys]
    gain = c.groupby(keys)["margin_ns"].sum().rename("gain_ns").reset_index()
    gains = member.merge(gain, on=keys, how="left").fillna({"gain_ns": 0})
    gains["gain_ns"] = gains["gain_ns"].astype("int64")
    steps = []
    if by_step:
        per_rank = gains.groupby(["sample", "rank"])["gain_ns"].sum().reset_index()
        for s, g in per_rank.groupby("sample"):
            g = g.sort_values(["gain_ns", "rank"], ascending=[False, True])
            top = g.iloc[0]
            nxt = g.iloc[1] if len(g) > 1 else None
            floor = floors.get(int(top["rank"]), 0)
            above = bool(top["gain_ns"] > floor)
            steps.append(
                {
                    "step": int(s),
                    "step_ns": int(step_ns.get(int(s))) if int(s) in step_ns.index else None,
                    "critical_rank": int(top["rank"]) if above else None,
                    "gain_ns": int(top["gain_ns"]) if above else 0,
                    "second_rank": int(nxt["rank"]) if nxt is not None and nxt["gain_ns"] > 0 else None,
                    "second_gain_ns": int(nxt["gain_ns"]) if nxt is not None else 0,
                    "floor_ns": int(floor),
                }
            )
    sdf = pd.DataFrame(steps, columns=STEP_COLUMNS)
    for col in ("step_ns", "critical_rank", "second_rank"):
        sdf[col] = sdf[col].astype("Int64")
    return gains, sdf, unit


@per_run
def arrival_analysis(store: Store, run: str | None = None) -> Arrivals:
    """Arrivals, per-sample gains, floors and critical steps of a run (cached per run content)."""
    al = run_alignment(store, run)
    co = clock_offsets(store, run)
    usable = co[co["status"].isin(USABLE_CLOCKS)]
    offsets = {int(r): int(al.offsets.get(int(r), 0)) for r in usable["rank"]}
    steps = activity.run_host_steps(store, run)
    starts = {
        int(r): (g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64))
        for r, g in steps.sort_values(["rank", "start_ns"]).groupby("rank")
    }
    arr = arrival_table(al.ops, offsets, _step_sets(steps), starts, steps)
    step_ns = (
        (steps["end_ns"] - steps["start_ns"]).groupby(steps["step"]).median()
        if not steps.empty
        else pd.Series(dtype="float64")
    )
    median_step = float(step_ns.median()) if len(step_ns) else None
    ranks = sorted({int(r) for r in arr["rank"]}) if not arr.empty else []
    floors = _floors(co, ranks, median_step)
    gains, critical, unit = gains_and_steps(arr, floors, step_ns)
    note = None
    if arr.empty:
        unaligned = co[~co["status"].isin(USABLE_CLOCKS)]["rank"].tolist() if not co.empty else []
        note = (
            "no collective was seen by every profiled member of its group"
            + (f"; rank(s) {', '.join(map(str, unaligned))} cannot be aligned" if unaligned else "")
            + ": arrival order cannot be compared"
        )
    total = float(step_ns[step_ns.index.isin(gains["sample"])].sum()) if unit == "step" and len(step_ns) else None
    return Arrivals(arr, gains, critical, floors, unit, total, note)


@per_run
def arrivals(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per member of every matched collective: its entry on the reference clock (less the
    time outside profiled steps), lateness, whether it arrived last and by what margin."""
    return arrival_analysis(store, run).arrivals


def critical_steps(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per step: the rank that set its length (largest what-if gain above the floor) and the
    gain ("if that rank had taken the median time, the step would be gain_ns shorter")."""
    return arrival_analysis(store, run).steps
