"""The Mann-Whitney U test and the step-time verdict built on it."""

from __future__ import annotations

import math

import pytest

from advisor.gate.stats import _exact_counts, hodges_lehmann, mann_whitney
from advisor.gate.timing import compare_timing


def test_exact_null_distribution_counts_every_ordering():
    for n, m in [(1, 1), (3, 4), (5, 5), (12, 10)]:
        counts = _exact_counts(n, m)
        assert sum(counts) == math.comb(n + m, m)
        assert counts == counts[::-1]  # U is symmetric under the null


def test_complete_separation_gives_the_smallest_exact_p_value():
    r = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert r.exact
    assert r.u == 25
    assert r.p_greater == pytest.approx(1 / math.comb(10, 5))
    assert r.p_less == pytest.approx(1.0)


def test_identical_samples_are_not_significant_either_way():
    x = [10.0, 10.5, 11.0, 10.2, 10.8]
    r = mann_whitney(x, x)
    assert not r.exact  # all ties: normal approximation with tie correction
    assert r.p_greater > 0.4 and r.p_less > 0.4


def test_matches_scipy_where_available():
    stats = pytest.importorskip("scipy.stats")
    base = [16.53, 16.55, 16.85, 16.59, 16.68, 22.31, 18.03, 16.77, 16.57]
    cand = [19.16, 17.89, 18.86, 19.36, 17.85, 18.06, 18.10, 20.23, 17.99, 28.24]
    ours = mann_whitney(base, cand)
    theirs = stats.mannwhitneyu(cand, base, alternative="greater", method="exact")
    assert ours.p_greater == pytest.approx(theirs.pvalue)
    tied = mann_whitney([1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 4, 5])
    ref = stats.mannwhitneyu([2, 3, 3, 4, 4, 5], [1, 2, 2, 3, 3, 3, 4], alternative="greater",
                             method="asymptotic")
    assert tied.p_greater == pytest.approx(ref.pvalue)


def test_hodges_lehmann_ignores_one_stalled_step():
    base = [10.0] * 9 + [30.0]
    cand = [11.0] * 10
    assert hodges_lehmann(base, cand) == pytest.approx(1.0)


BASE = (10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98)


def test_a_significant_change_over_the_threshold_is_slower():
    t = compare_timing(BASE, tuple(x * 1.10 for x in BASE), threshold=0.05)
    assert t.verdict == "slower"
    assert t.change == pytest.approx(0.10)


def test_a_significant_change_under_the_threshold_is_unchanged():
    t = compare_timing(BASE, tuple(x * 1.03 for x in BASE), threshold=0.05)
    assert t.verdict == "unchanged"
    assert t.test.p_greater < 0.05


def test_faster_is_reported():
    assert compare_timing(BASE, tuple(x * 0.8 for x in BASE), threshold=0.05).verdict == "faster"


def test_a_large_change_within_the_noise_is_noisy():
    base = (10.0, 14.0, 9.0, 13.0, 10.5, 12.5)
    cand = (9.5, 15.0, 12.8, 13.5, 12.6, 9.8)
    t = compare_timing(base, cand, threshold=0.05)
    assert t.change > 0.05
    assert t.verdict == "noisy"


def test_fewer_than_five_steps_cannot_decide():
    t = compare_timing(BASE[:4], tuple(x * 2 for x in BASE[:4]), threshold=0.05)
    assert t.verdict == "too few steps"
