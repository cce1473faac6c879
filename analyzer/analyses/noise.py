"""Is a difference between two runs more than their step-to-step noise?

Each run gives one value per profiled step (a step's mean over the compared ranks); a difference
counts as real when Yuen's test rejects equal means at 99 %, two sided — Welch's t-test (unequal
variances) on 20 %-trimmed means with winsorized variances, as benchmark comparers do before they
report a change (asv's ``compare`` flags a ratio only when the change is also statistically
significant). The trimming is what makes it hold on a busy machine: one step of six stalled by the
machine (a load spike, a page-in, a collector flush) inflates the plain variance so much that a run
nine times slower read as "within the noise" (seen: slow 407–437 ms a step beside one 1 242 ms step,
base 39–83 ms: Welch's t 3.7 against 4.0). Fewer than five steps on a side are not trimmed: the test
is Welch's. With fewer than two steps on a side there is no spread to judge by: the difference is
taken as measured (``significant`` None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Student's t, two-sided 99 % (0.995 quantile), by degrees of freedom; beyond the table, the normal 2.576
_T_995 = {
    1: 63.657,
    2: 9.925,
    3: 5.841,
    4: 4.604,
    5: 4.032,
    6: 3.707,
    7: 3.499,
    8: 3.355,
    9: 3.250,
    10: 3.169,
    11: 3.106,
    12: 3.055,
    13: 3.012,
    14: 2.977,
    15: 2.947,
    16: 2.921,
    17: 2.898,
    18: 2.878,
    19: 2.861,
    20: 2.845,
    21: 2.831,
    22: 2.819,
    23: 2.807,
    24: 2.797,
    25: 2.787,
    26: 2.779,
    27: 2.771,
    28: 2.763,
    29: 2.756,
    30: 2.750,
    40: 2.704,
    60: 2.660,
    120: 2.617,
}
CONFIDENCE = 0.99
TRIM = 0.2  # the share of steps set aside at each end (Wilcox's usual 20 %)


def t_critical(df: float) -> float:
    """The two-sided 99 % critical value of Student's t with ``df`` degrees of freedom (rounded down
    to the table: conservative for Welch's fractional df)."""
    if df < 1:
        return math.inf
    d = int(math.floor(df))
    if d in _T_995:
        return _T_995[d]
    below = [k for k in _T_995 if k <= d]
    return _T_995[max(below)] if d <= max(_T_995) else 2.576


@dataclass(frozen=True)
class Noise:
    """Yuen's (Welch's, untrimmed) test of the step values of two runs."""

    n_base: int
    n_new: int
    t: float | None  # None: fewer than two steps on a side
    df: float | None
    critical: float | None
    significant: bool | None  # None: not testable (as measured)
    trimmed_base: int = 0  # steps set aside at each end of the base's sorted values
    trimmed_new: int = 0

    def sentence(self) -> str:
        if self.significant is None:
            return "a single step on a side: no step-to-step spread to test against"
        word = "beyond" if self.significant else "within"
        if not (self.trimmed_base or self.trimmed_new):
            return (
                f"{word} the step-to-step noise (Welch's t = {abs(self.t or 0):.1f} vs {self.critical:.1f} "
                f"at 99 %, {self.n_base} and {self.n_new} steps)"
            )
        return (
            f"{word} the step-to-step noise (Yuen's t = {abs(self.t or 0):.1f} vs {self.critical:.1f} "
            f"at 99 %, {self.n_base} and {self.n_new} steps, {self.trimmed_base} and {self.trimmed_new} set aside "
            "at each end)"
        )


def _trimmed(xs: list[float], trim: float) -> tuple[int, float, float]:
    """``g`` (the values set aside at each end), the trimmed mean and the winsorized variance
    (each set-aside value replaced by the nearest kept one) of ``xs``."""
    xs = sorted(xs)
    n = len(xs)
    g = int(math.floor(trim * n)) if n >= 5 else 0
    kept = xs[g : n - g]
    wins = [kept[0]] * g + kept + [kept[-1]] * g
    m = sum(wins) / n
    return g, sum(kept) / len(kept), sum((x - m) ** 2 for x in wins) / (n - 1)


def yuen(base: Sequence[float], new: Sequence[float], trim: float = TRIM) -> Noise:
    """Yuen's test of ``new`` against ``base`` (values per step): Welch's t on the ``trim``-trimmed
    means, each side's standard error from its winsorized variance, ``(n - 1) s_w² / (h (h - 1))``
    with ``h`` the values kept, and Welch's degrees of freedom on ``h - 1`` (Yuen 1974; Wilcox,
    *Introduction to Robust Estimation and Hypothesis Testing*, 5.3). ``trim=0`` is Welch's test."""
    b = [float(x) for x in base if x is not None and not math.isnan(float(x))]
    n = [float(x) for x in new if x is not None and not math.isnan(float(x))]
    if len(b) < 2 or len(n) < 2:
        return Noise(len(b), len(n), None, None, None, None)
    gb, mb, vb = _trimmed(b, trim)
    gn, mn, vn = _trimmed(n, trim)
    hb, hn = len(b) - 2 * gb, len(n) - 2 * gn
    db, dn = (len(b) - 1) * vb / (hb * (hb - 1)), (len(n) - 1) * vn / (hn * (hn - 1))
    se2 = db + dn
    if se2 == 0:  # no spread at all: any difference is real
        return Noise(len(b), len(n), math.inf if mn != mb else 0.0, math.inf, 0.0, mn != mb, gb, gn)
    t = (mn - mb) / math.sqrt(se2)
    df = se2**2 / (db**2 / (hb - 1) + dn**2 / (hn - 1))
    crit = t_critical(df)
    return Noise(len(b), len(n), t, df, crit, abs(t) > crit, gb, gn)
