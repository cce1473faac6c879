"""Slow rank by msprof-analyze's vote (recipe ``slow_rank``), with the evidence rows that convict.

Same rule as msprof-analyze: members of one collective leave it together, so the rank that arrived
last waits least: its elapsed time is the *shortest*. For every collective instance (p2p excluded;
groups whose instances were not seen by the same number of ranks are skipped, as msprof-analyze
drops groups whose op counts differ) the elapsed times of the members are tested for a low
outlier: Dixon's Q test at 99.5 % for up to 100 members, else the 3σ rule (any member below
mean − 3σ, plus the shortest member when some member is above mean + 3σ). Each convicted rank gets
one vote. Instances are matched by (group, step, op type, size, order) instead of msprof-analyze's
op name, which is the same thing for HCCL names and works for gloo/NCCL traces too.

Note Dixon's test needs at least 4 distinct times: with 2 or 3 ranks per group nobody is voted
(exactly as in msprof-analyze).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import Store
from .cache import per_run
from .clock_alignment import run_instances

MAX_DIXON_NUM = 100
DIXON_THRESHOLD_1, DIXON_THRESHOLD_2, DIXON_THRESHOLD_3 = 7, 10, 13
# one-sided Dixon critical values, 99.5 % (msprof-analyze dixon_table.DIXON_TABLE_995)
DIXON_TABLE_995 = {
    3: 0.994,
    4: 0.920,
    5: 0.823,
    6: 0.744,
    7: 0.680,
    8: 0.723,
    9: 0.676,
    10: 0.638,
    11: 0.707,
    12: 0.675,
    13: 0.649,
    14: 0.672,
    15: 0.649,
    16: 0.629,
    17: 0.611,
    18: 0.595,
    19: 0.580,
    20: 0.568,
    21: 0.556,
    22: 0.545,
    23: 0.536,
    24: 0.526,
    25: 0.519,
    26: 0.510,
    27: 0.503,
    28: 0.496,
    29: 0.489,
    30: 0.484,
    31: 0.478,
    32: 0.473,
    33: 0.468,
    34: 0.463,
    35: 0.458,
    36: 0.454,
    37: 0.450,
    38: 0.446,
    39: 0.442,
    40: 0.439,
    41: 0.435,
    42: 0.432,
    43: 0.429,
    44: 0.425,
    45: 0.423,
    46: 0.420,
    47: 0.417,
    48: 0.414,
    49: 0.412,
    50: 0.409,
    51: 0.407,
    52: 0.405,
    53: 0.402,
    54: 0.400,
    55: 0.398,
    56: 0.396,
    57: 0.394,
    58: 0.392,
    59: 0.391,
    60: 0.388,
    61: 0.387,
    62: 0.385,
    63: 0.383,
    64: 0.382,
    65: 0.380,
    66: 0.379,
    67: 0.377,
    68: 0.376,
    69: 0.374,
    70: 0.372,
    71: 0.371,
    72: 0.370,
    73: 0.368,
    74: 0.368,
    75: 0.366,
    76: 0.365,
    77: 0.364,
    78: 0.363,
    79: 0.361,
    80: 0.360,
    81: 0.359,
    82: 0.358,
    83: 0.356,
    84: 0.356,
    85: 0.355,
    86: 0.353,
    87: 0.352,
    88: 0.352,
    89: 0.351,
    90: 0.350,
    91: 0.349,
    92: 0.348,
    93: 0.347,
    94: 0.346,
    95: 0.345,
    96: 0.344,
    97: 0.344,
    98: 0.343,
    99: 0.341,
    100: 0.341,
}

VOTE_COLUMNS = ["rank", "votes", "instances", "vote_ratio", "testable"]
MIN_TESTABLE = 4  # Dixon's Q needs at least 4 members (msprof-analyze: 4 distinct times)
EVIDENCE_COLUMNS = [
    "slow_ranks",
    "instance",
    "group_name",
    "step",
    "op_type",
    "name",
    "bytes",
    "ts_ns",
    "test",
    "statistic",
    "critical",
    "count",
    "mean_ns",
    "std_ns",
    "min_ns",
    "q1_ns",
    "median_ns",
    "q3_ns",
    "max_ns",
    "sum_ns",
    "elapsed_by_rank",
]


def judge_dixon(times: list[float]) -> tuple[list[int], float | None, float | None]:
    """Indices of the low outlier by Dixon's Q test (msprof-analyze ``judge_dixon``), statistic, critical."""
    n = len(times)
    if n in (0, 1, 2):
        return [], None, None
    s = sorted(times)
    if len(set(s)) <= 3:
        return [], None, None
    if n <= DIXON_THRESHOLD_1:
        num, den = s[1] - s[0], s[-1] - s[0]
    elif n <= DIXON_THRESHOLD_2:
        num, den = s[1] - s[0], s[-2] - s[0]
    elif n <= DIXON_THRESHOLD_3:
        num, den = s[2] - s[0], s[-2] - s[0]
    else:
        num, den = s[2] - s[0], s[-3] - s[0]
    q = num / den if den else 0.0
    crit = DIXON_TABLE_995[n]
    return ([times.index(s[0])] if q > crit else []), q, crit


def judge_norm(times: list[float], threshold: float = 3) -> tuple[list[int], float, float]:
    """Low outliers by the 3σ rule (msprof-analyze ``judge_norm``): statistic = min z-score."""
    mean, std = float(np.mean(times)), float(np.std(times))
    low, high = mean - threshold * std, mean + threshold * std
    out = [i for i, t in enumerate(times) if t < low]
    if max(times) > high and times.index(min(times)) not in out:
        out.append(times.index(min(times)))
    z = (min(times) - mean) / std if std else 0.0
    return out, z, -threshold


def judge_slow_rank(times: list[float]) -> tuple[list[int], str, float | None, float | None]:
    if len(times) <= MAX_DIXON_NUM:
        idx, stat, crit = judge_dixon(times)
        return idx, "dixon_q_99.5", stat, crit
    idx, stat, crit = judge_norm(times)
    return idx, "3sigma", stat, crit


def _vote(ops: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    coll = ops[ops["instance"].notna() & ~ops["is_p2p"] & ops["group_name"].notna()]
    skipped = []
    keep_groups = []
    for g, sub in coll.groupby("group_name"):
        if sub.groupby("instance")["rank"].nunique().nunique() > 1:
            skipped.append(str(g))
        else:
            keep_groups.append(g)
    coll = coll[coll["group_name"].isin(keep_groups)]
    votes: dict[int, int] = {}
    seen: dict[int, int] = {}
    testable: dict[int, int] = {}
    evidence = []
    for inst, sub in coll.groupby("instance", sort=False):
        sub = sub.sort_values("rank")
        times = [float(x) for x in sub["dur_ns"]]
        ranks = [int(r) for r in sub["rank"]]
        for r in ranks:
            seen[r] = seen.get(r, 0) + 1
            if len(ranks) >= MIN_TESTABLE:
                testable[r] = testable.get(r, 0) + 1
        idx, test, stat, crit = judge_slow_rank(times)
        if not idx:
            continue
        slow = [ranks[i] for i in idx]
        for r in slow:
            votes[r] = votes.get(r, 0) + 1
        ser = pd.Series(times)
        first = sub.iloc[0]
        evidence.append(
            {
                "slow_ranks": slow,
                "instance": inst,
                "group_name": first["group_name"],
                "step": first["step"],
                "op_type": first["op_type"],
                "name": first["name"],
                "bytes": first["bytes"],
                "ts_ns": int(min(sub["ts_ns"].iloc[i] for i in idx)),
                "test": test,
                "statistic": stat,
                "critical": crit,
                "count": len(times),
                "mean_ns": ser.mean(),
                "std_ns": ser.std(),
                "min_ns": ser.min(),
                "q1_ns": ser.quantile(0.25),
                "median_ns": ser.median(),
                "q3_ns": ser.quantile(0.75),
                "max_ns": ser.max(),
                "sum_ns": ser.sum(),
                "elapsed_by_rank": dict(zip(ranks, [int(t) for t in times])),
            }
        )
    all_ranks = sorted({int(r) for r in ops["rank"].unique()})
    vdf = (
        pd.DataFrame(
            [
                {
                    "rank": r,
                    "votes": votes.get(r, 0),
                    "instances": seen.get(r, 0),
                    "vote_ratio": (votes.get(r, 0) / seen[r]) if seen.get(r) else 0.0,
                    "testable": testable.get(r, 0),
                }
                for r in all_ranks
            ],
            columns=VOTE_COLUMNS,
        )
        .sort_values(["votes", "rank"], ascending=[False, True])
        .reset_index(drop=True)
    )
    edf = pd.DataFrame(evidence, columns=EVIDENCE_COLUMNS)
    if not edf.empty:
        edf = edf.sort_values("ts_ns").reset_index(drop=True)
    return vdf, edf, skipped


@per_run
def slow_rank_analysis(store: Store, run: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(votes per rank, evidence per convicting instance, groups skipped because ranks saw
    different numbers of instances)."""
    ops, _ = run_instances(store, run)
    return _vote(ops)


@per_run
def slow_ranks(store: Store, run: str | None = None) -> pd.DataFrame:
    """Votes per rank (msprof-analyze ``SlowRank``: rankId, slowAffectCount): rank, votes,
    instances (collectives the rank took part in and that were judged), vote_ratio, testable (those
    of them with at least 4 profiled members, the fewest Dixon's test can convict in); most votes first."""
    return slow_rank_analysis(store, run)[0]


def slow_rank_evidence(store: Store, run: str | None = None) -> pd.DataFrame:
    """The convicting instances (msprof-analyze ``SlowOpStats``): slow rank(s), the collective,
    the test with its statistic and critical value, and the members' elapsed times."""
    return slow_rank_analysis(store, run)[1]
