"""Durations kept as log-bucketed histograms, from which quantiles come back within a stated
relative error (the mapping of DDSketch, Masson et al., VLDB 2019): the ingest stores one per
operator and kernel statistics row (``agg_operator_stats`` / ``agg_kernel_stats``), the web app's
drill merges them (histograms of one rank add up bucket by bucket) and reads its quantiles.

A duration d > 0 ns falls in bucket k = ceil(log_γ d), the interval (γ^(k-1), γ^k], with
γ = (1 + α) / (1 - α); the bucket's value 2γ^k / (γ + 1) is within α of every duration in it
(relatively). A zero-length call has bucket ``ZERO`` (value 0, exact). So is, then, every quantile
``quantiles`` gives (an interpolation between two order statistics, each within α), and the
smallest and largest calls are exact (given)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# relative accuracy of the quantiles read from a histogram (1 %), and the bucket ratio it makes
RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
ZERO = -1  # the bucket of zero-length calls


def bucket_sql(column: str) -> str:
    """SQL: the bucket of a duration column (>= 0; NULL stays NULL)."""
    return f"CASE WHEN {column} <= 0 THEN {ZERO} ELSE CAST(ceil(ln({column}) / {math.log(GAMMA)!r}) AS INTEGER) END"


def bucket_values(buckets: np.ndarray) -> np.ndarray:
    """The value each bucket stands for (ns): within ``RELATIVE_ACCURACY`` of any duration in it."""
    b = np.asarray(buckets, dtype=np.float64)
    return np.where(b == ZERO, 0.0, 2.0 * np.power(GAMMA, b) / (GAMMA + 1.0))


def quantiles(
    buckets: Sequence[Sequence[int]],
    counts: Sequence[Sequence[int]],
    qs: Sequence[float],
    lo: Sequence[float],
    hi: Sequence[float],
) -> np.ndarray:
    """Per group g, the quantiles ``qs`` of the durations its histograms hold (``buckets[g]`` in any
    order, repeated ones adding up their ``counts[g]``), interpolated between order statistics as
    DuckDB's ``quantile_cont`` does; ``lo[g]`` and ``hi[g]`` are its exact shortest and longest
    durations (the first and last order statistics, and bounds of every other). An array (groups x
    qs); NaN for a group holding nothing. All groups at once (a drill has one per rank)."""
    sizes = np.fromiter((len(x) for x in buckets), dtype=np.int64, count=len(buckets))
    n_groups, q = sizes.size, np.asarray(qs, dtype=np.float64)
    if not sizes.sum():
        return np.full((n_groups, q.size), np.nan)
    g = np.repeat(np.arange(n_groups), sizes)
    b = np.concatenate([np.asarray(x, dtype=np.int64) for x in buckets])
    c = np.concatenate([np.asarray(x, dtype=np.int64) for x in counts])
    order = np.lexsort((b, g))
    g, b, c = g[order], b[order], c[order]
    first = np.r_[True, (np.diff(g) != 0) | (np.diff(b) != 0)]  # a (group, bucket)'s first entry
    c = np.bincount(np.cumsum(first) - 1, weights=c).astype(np.int64)
    g, b = g[first], b[first]
    n = np.bincount(g, weights=c, minlength=n_groups).astype(np.int64)
    before = np.cumsum(n) - n  # order statistic j of group g is the (before[g] + j)-th of all
    ends = np.cumsum(c)  # ... which lies in the first entry whose end is past it
    low, high = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    values = np.clip(bucket_values(b), low[g], high[g])

    def order_stats(j: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(ends, before[:, None] + j, side="right"), ends.size - 1)
        last = (n - 1)[:, None]
        return np.where(j == 0, low[:, None], np.where(j == last, high[:, None], values[at]))

    h = np.maximum(n - 1, 0)[:, None] * q[None, :]
    i = np.floor(h).astype(np.int64)
    x = order_stats(i)
    out = x + (h - i) * (order_stats(np.minimum(i + 1, np.maximum(n - 1, 0)[:, None])) - x)
    out[n == 0] = np.nan
    return out
