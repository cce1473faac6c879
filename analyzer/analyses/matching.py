"""How well the communication ops of a run matched across ranks, per group, and why not where not.

Every cross-rank answer (wait/transit, slow-rank votes, clock offsets, arrival order) stands on
collectives matched across their members (``collectives``, checked against the clocks in
``clock_alignment``). This table says, per group, what matched and, in a sentence, what could not
be matched and why, so that an empty answer is never silent.
"""

from __future__ import annotations

import pandas as pd

from ..store import Store
from .cache import per_run
from .clock_alignment import run_alignment

COLUMNS = [
    "group_name",
    "ranks",
    "ranks_profiled",
    "ops",
    "instances",
    "complete",
    "incomplete",
    "matched_by_time",
    "unmatched_ops",
    "key",
    "note",
]


@per_run
def collective_matching(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per communication group (and one for ops that name none): ops, instances, those seen
    by every profiled member (``complete``), those re-paired by their corrected ends
    (``matched_by_time``), ops left alone, what the key was made of, and a note saying why
    something could not be matched."""
    al = run_alignment(store, run)
    ops = al.ops
    if ops.empty:
        return pd.DataFrame(columns=COLUMNS)
    present = set(al.ranks)
    rows = []
    for g, sub in ops.groupby(ops["group_name"].fillna("\0"), sort=True):
        if g == "\0":
            rows.append(
                {
                    "group_name": None,
                    "ranks": [],
                    "ranks_profiled": sorted({int(r) for r in sub["rank"]}),
                    "ops": len(sub),
                    "instances": 0,
                    "complete": 0,
                    "incomplete": 0,
                    "matched_by_time": 0,
                    "unmatched_ops": len(sub),
                    "key": None,
                    "note": (
                        f"{len(sub)} op(s) name no group and none could be attributed (a gloo send/recv in a "
                        "rank with several groups names neither its group nor its peer): not matched across ranks"
                    ),
                }
            )
            continue
        members = list(al.members.get(g, ()))
        prof = sorted(r for r in members if r in present) or sorted({int(r) for r in sub["rank"]})
        inst = sub[sub["instance"].notna()]
        seen = inst.groupby("instance")["rank"].nunique()
        need = int(sub["n_members"].max()) if sub["n_members"].notna().any() else len(prof)
        complete = int((seen >= max(need, 2)).sum()) if need >= 2 else 0
        incomplete = int(((seen < need) & (seen >= 1)).sum()) if need >= 2 else 0
        by_time = int(inst.loc[inst["match"] == "time", "instance"].nunique()) if "match" in inst else 0
        alone = int((sub["n_seen"].fillna(0) < 2).sum()) if need >= 2 else len(sub)
        keys = sorted(set(sub["match_key"].dropna())) if "match_key" in sub else []
        notes = []
        if len(prof) < 2:
            notes.append(
                f"only rank {prof[0] if prof else '?'} of the group's {len(members) or '?'} was profiled: "
                "nothing to match with (no wait/transit split, no arrival order)"
            )
        else:
            if len(prof) < len(members):
                notes.append(f"{len(prof)} of the group's {len(members)} ranks profiled: matched among those")
            if incomplete:
                notes.append(
                    f"{incomplete} instance(s) seen by fewer than the {need} profiled members (those calls are "
                    "missing from a rank's trace: sampled or cut traces, or different profiling windows); "
                    "they are left out of the cross-rank analyses"
                )
            if by_time:
                notes.append(
                    f"{by_time} instance(s) re-paired by their corrected end times (matching by order paired "
                    "different calls)"
                )
            no_size, no_step = int(sub["bytes"].isna().sum()), int(sub["step"].isna().sum())
            if keys and all(k in ("order", "step") for k in keys) and no_size:
                notes.append(
                    f"matched by order without message sizes ({no_size} of {len(sub)} ops have none: the export "
                    "records no size for them)"
                )
            if keys and all(k in ("order", "size") for k in keys) and no_step:
                notes.append(
                    f"matched by order across the trace, not within steps ({no_step} of {len(sub)} ops carry no "
                    "step id: no step marker around them, or a producer that writes none)"
                )
        rows.append(
            {
                "group_name": g,
                "ranks": members,
                "ranks_profiled": prof,
                "ops": len(sub),
                "instances": int(inst["instance"].nunique()),
                "complete": complete,
                "incomplete": incomplete,
                "matched_by_time": by_time,
                "unmatched_ops": alone,
                "key": ", ".join(keys) if keys else None,
                "note": "; ".join(notes) if notes else None,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
