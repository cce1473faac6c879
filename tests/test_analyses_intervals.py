"""Interval-set helpers checked against a brute-force timeline of unit cells."""

from __future__ import annotations

import numpy as np
import pytest

from analyzer.breakdown import intervals as iv


def _cells(starts, ends, n):
    m = np.zeros(n, dtype=bool)
    for s, e in zip(starts, ends):
        m[max(s, 0) : max(e, 0)] = True
    return m


@pytest.mark.parametrize("seed", range(25))
def test_set_operations_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 400
    k1, k2 = rng.integers(0, 30, 2)
    a_s = rng.integers(0, n, k1)
    a_e = a_s + rng.integers(-3, 60, k1)  # some empty / negative ones
    b_s = rng.integers(0, n, k2)
    b_e = b_s + rng.integers(0, 60, k2)
    a = iv.union(a_s, np.minimum(a_e, n))
    b = iv.union(b_s, np.minimum(b_e, n))
    ca, cb = _cells(a_s, np.minimum(a_e, n), n), _cells(b_s, np.minimum(b_e, n), n)
    assert iv.total(a) == ca.sum()
    assert iv.total(iv.intersect(a, b)) == (ca & cb).sum()
    assert iv.total(iv.subtract(a, b)) == (ca & ~cb).sum()
    assert iv.total(iv.merge(a, b)) == (ca | cb).sum()
    lo, hi = sorted(rng.integers(0, n, 2))
    window = np.zeros(n, dtype=bool)
    window[lo:hi] = True
    assert iv.total(iv.clip(a, lo, hi)) == (ca & window).sum()
    assert iv.total(iv.gaps(a, lo, hi)) == (~ca & window).sum()
    # normalised: sorted, disjoint, non-touching, non-empty
    for s, e in (a, iv.intersect(a, b), iv.subtract(a, b), iv.merge(a, b)):
        assert np.all(e > s)
        assert np.all(s[1:] > e[:-1])


def test_union_merges_nested_and_touching():
    s, e = iv.union([0, 2, 10, 20, 25], [10, 5, 15, 30, 26])
    assert s.tolist() == [0, 20] and e.tolist() == [15, 30]
    assert iv.span((s, e)) == (0, 30)
    assert iv.span(iv.empty()) is None
    g = iv.gaps((s, e), -5, 40)
    assert list(zip(g[0].tolist(), g[1].tolist())) == [(-5, 0), (15, 20), (30, 40)]
