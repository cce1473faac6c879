"""Stragglers: the rank that holds the others back, with its cause and what it costs.

From the arrival order (``arrivals``): a rank is **named a straggler** when, in one of its groups,
over at least ``MIN_SAMPLES`` samples (steps; collectives when the run has no steps), the median
of its per-sample what-if gain exceeds both

- ``NOISE_FACTOR`` × the 90th percentile of the *other* members' per-sample gains in that group:
  random lateness (a rank descheduled, a late wake-up) lands on every rank in turn, a straggler's
  is its own, step after step; with a straggler present the others' gains are about zero, without
  one every rank's median is within the spread of the others'. Judged per group because a group's
  lateness has its own structure (in a pipeline, a data-parallel group's members arrive in the
  order their stage's receives end); and
- its **floor** (``arrivals``: the clock uncertainty × 3, and at least 10 % of the median step time).

The thresholds were measured on real gloo jobs with no slow rank (docs/analyses.md: the largest
ratio of a rank's median gain to its threshold on the controls). The cause is the one with the
largest excess over the peers summed over the rank's late collectives (``blame``), with the
operators that grew most. msprof-analyze's Dixon / 3σ vote stays beside it (``slow_rank_votes``),
for those who cross-check with that tool.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from ..messages import message, render
from ..store import Store
from .arrivals import arrival_analysis
from .blame import CAUSE_TEXT, CAUSES, blame_chains
from .cache import per_run
from .slow_rank import slow_ranks

MIN_SAMPLES = 3
NOISE_FACTOR = 2.0
TOP_OPS = 5
COLUMNS = [
    "rank",
    "straggler",
    "group_name",
    "cause",
    "cause_text",
    "top_ops",
    "whatif_gain_ns",
    "gain_share",
    "median_gain_ns",
    "samples",
    "late_samples",
    "others_p90_ns",
    "floor_ns",
    "threshold_ns",
    "slow_rank_votes",
    "verdict",
    "verdict_msg",  # the verdict as a message of analyzer.messages (shown in the reader's language)
]


@per_run
def stragglers(store: Store, run: str | None = None) -> pd.DataFrame:
    """One row per rank with matched collectives: named straggler or not (and why), its cause and
    the operators behind it, the what-if gain summed over the run ("if it had taken the median
    time, the run would be whatif_gain_ns shorter") and its share of the profiled step time, the
    figures of the test, and msprof-analyze's vote count. Stragglers first."""
    a = arrival_analysis(store, run)
    if a.gains.empty:
        return pd.DataFrame(columns=COLUMNS)
    votes = slow_ranks(store, run)
    vote = votes.set_index("rank")["votes"] if not votes.empty else pd.Series(dtype="int64")
    chains = blame_chains(store, run)
    unit = a.sample_unit
    rows = []
    for r in sorted({int(x) for x in a.gains["rank"]}):
        floor = a.floors.get(r, 0)
        best = None  # the group where the rank stands out most: (ratio, group, n, median, p90, threshold)
        for g, sub in a.gains[a.gains["group_name"].isin(a.gains.loc[a.gains["rank"] == r, "group_name"])].groupby(
            "group_name"
        ):
            mine = sub.loc[sub["rank"] == r, "gain_ns"].astype("float64")
            others = sub.loc[sub["rank"] != r, "gain_ns"].astype("float64")
            n = len(mine)
            med = float(mine.median()) if n else 0.0
            p90 = float(others.quantile(0.9)) if len(others) else 0.0
            threshold = max(NOISE_FACTOR * p90, float(floor))
            ratio = med / threshold if threshold else (float("inf") if med > 0 else 0.0)
            cand = (n >= MIN_SAMPLES, ratio, str(g), n, med, p90, threshold)
            if best is None or cand[:2] > best[:2]:
                best = cand
        assert best is not None
        testable, ratio, group, n, med, p90, threshold = best
        named = testable and med > threshold
        where = message("straggler.in_group", group=str(group)) if a.gains["group_name"].nunique() > 1 else ""
        per = message(f"unit.{unit}")
        if not testable:
            why = message("straggler.too_few", n=n, unit=per, where=where, needed=MIN_SAMPLES)
            verdict = message("straggler.verdict.not_judged", why=why)
        elif named:
            verdict = message(
                "straggler.verdict.named", where=where, median=med, unit=per, factor=NOISE_FACTOR, p90=p90, floor=floor
            )
        else:
            why = (
                message("straggler.below_noise", factor=NOISE_FACTOR, p90=p90)
                if NOISE_FACTOR * p90 >= floor
                else message("straggler.below_floor", floor=float(floor))
            )
            verdict = message("straggler.verdict.not_named", where=where, median=med, unit=per, why=why)
        mine_all = a.gains.loc[a.gains["rank"] == r].groupby("sample")["gain_ns"].sum().astype("float64")
        mine_chains = chains[chains["last_rank"] == r] if not chains.empty else chains
        cause, top = _cause_of(mine_chains)
        whatif = int(mine_all.sum())
        rows.append(
            {
                "rank": r,
                "straggler": bool(named),
                "group_name": group,
                "cause": cause,
                "cause_text": CAUSE_TEXT.get(cause) if cause else None,
                "top_ops": top,
                "whatif_gain_ns": whatif,
                "gain_share": whatif / a.step_ns if a.step_ns else None,
                "median_gain_ns": int(med),
                "samples": int(n),
                "late_samples": int((mine_all > floor).sum()),
                "others_p90_ns": int(p90),
                "floor_ns": int(floor),
                "threshold_ns": int(threshold),
                "slow_rank_votes": int(vote.get(r, 0)),
                "verdict": render(verdict),
                "verdict_msg": verdict,
            }
        )
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.sort_values(["straggler", "whatif_gain_ns", "rank"], ascending=[False, False, True]).reset_index(
        drop=True
    )


def _cause_of(chains: pd.DataFrame) -> tuple[str | None, list[dict]]:
    """The cause with the largest excess summed over a rank's late collectives and, when it is
    compute, the operators whose time grew most over them."""
    if chains.empty:
        return None, []
    total = {c: sum(int(e.get(c, 0)) for e in chains["excess_by_cause"]) for c in CAUSES}
    best = max(CAUSES, key=lambda c: total[c])
    if total[best] <= 0:
        return "unexplained", []
    if best != "compute":  # the operators say something only when computing took longer
        return best, []
    ops: dict[str, int] = defaultdict(int)
    for top in chains.loc[chains["cause"] == "compute", "top_ops"]:
        for t in top:
            ops[t["name"]] += int(t["excess_ns"])
    ranked = sorted(ops.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    return best, [{"name": n, "excess_ns": v} for n, v in ranked]
