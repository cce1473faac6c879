"""Is a difference between two runs more than their step-to-step noise?

Each run gives one value per profiled step (a step's mean over the compared ranks); a difference of
the means counts as real when Welch's t-test (unequal variances) rejects equal means at 99 %, two
sided — as benchmark comparers do before they report a change (asv's ``compare`` flags a ratio only
when the change is also statistically significant). With fewer than two steps on a side there is no
spread to judge by: the difference is taken as measured (``significant`` None).
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
    """Welch's test of the step values of two runs."""

    n_base: int
    n_new: int
    t: float | None  # None: fewer than two steps on a side
    df: float | None
    critical: float | None
    significant: bool | None  # None: not testable (as measured)

    def sentence(self) -> str:
        if self.significant is None:
            return "a single step on a side: no step-to-step spread to test against"
        word = "beyond" if self.significant else "within"
        return (
            f"{word} the step-to-step noise (Welch's t = {abs(self.t or 0):.1f} vs {self.critical:.1f} "
            f"at 99 %, {self.n_base} and {self.n_new} steps)"
        )


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def welch(base: Sequence[float], new: Sequence[float]) -> Noise:
    """Welch's t-test of ``new`` against ``base`` (values per step)."""
    b = [float(x) for x in base if x is not None and not math.isnan(float(x))]
    n = [float(x) for x in new if x is not None and not math.isnan(float(x))]
    if len(b) < 2 or len(n) < 2:
        return Noise(len(b), len(n), None, None, None, None)
    mb, vb = _mean_var(b)
    mn, vn = _mean_var(n)
    se2 = vb / len(b) + vn / len(n)
    if se2 == 0:  # no spread at all: any difference is real
        return Noise(len(b), len(n), math.inf if mn != mb else 0.0, math.inf, 0.0, mn != mb)
    t = (mn - mb) / math.sqrt(se2)
    df = se2**2 / ((vb / len(b)) ** 2 / (len(b) - 1) + (vn / len(n)) ** 2 / (len(n) - 1))
    crit = t_critical(df)
    return Noise(len(b), len(n), t, df, crit, abs(t) > crit)
