"""How well the communication ops of a run matched across ranks, per group, and why not where not.

Every cross-rank answer (wait/transit, slow-rank votes, clock offsets, arrival order) stands on
collectives matched across their members (``collectives``, checked against the clocks in
``clock_alignment``). This table says, per group, what matched and, in a sentence, what could not
be matched and why, so that an empty answer is never silent.
"""

from __future__ import annotations

import pandas as pd

from ..messages import message, render
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
    "notes",  # the note's parts as messages of analyzer.messages (shown in the reader's language)
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
                    "note": render(message("matching.no_group", ops=len(sub))),
                    "notes": [message("matching.no_group", ops=len(sub))],
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
            notes.append(message("matching.one_rank", rank=prof[0] if prof else "?", members=len(members) or "?"))
        else:
            if len(prof) < len(members):
                notes.append(message("matching.some_ranks", profiled=len(prof), members=len(members)))
            if incomplete:
                notes.append(message("matching.incomplete", n=incomplete, need=need))
            if by_time:
                notes.append(message("matching.by_time", n=by_time))
            no_size, no_step = int(sub["bytes"].isna().sum()), int(sub["step"].isna().sum())
            if keys and all(k in ("order", "step") for k in keys) and no_size:
                notes.append(message("matching.no_size", missing=no_size, ops=len(sub)))
            if keys and all(k in ("order", "size") for k in keys) and no_step:
                notes.append(message("matching.no_step", missing=no_step, ops=len(sub)))
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
                "note": "; ".join(render(n) for n in notes) if notes else None,
                "notes": notes,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
