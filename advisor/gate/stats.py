"""Is the candidate's step slower than the baseline's, beyond the runs' own noise?

Step times are not normal: a step stalls now and then (a page fault, a collective waiting on a
peer, the allocator growing), so their distributions have long right tails. A t-test on means is
pulled by those tails; the Mann-Whitney U test asks only whether a candidate step tends to be
slower than a baseline step, using ranks. It is exact for the sample sizes a profile holds (tens
of steps), so no distribution is assumed. It is implemented here, in a few lines of integer
arithmetic, rather than importing scipy for one function.

The effect size is the Hodges-Lehmann shift (the median of all pairwise differences), which is
the estimate that goes with this test and, like it, ignores a few stalled steps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

EXACT_MAX_N = 60
"""Per-sample size up to which the exact null distribution is computed (larger: normal
approximation, which is accurate there)."""


@dataclass(frozen=True)
class MannWhitney:
    u: float  # pairs (b, c) with c > b, ties counting one half
    p_greater: float  # one-sided p-value: candidate steps tend to be longer
    p_less: float  # one-sided p-value: candidate steps tend to be shorter
    exact: bool


def _u_statistic(base: Sequence[float], cand: Sequence[float]) -> tuple[float, bool]:
    u, ties = 0.0, False
    for c in cand:
        for b in base:
            if c > b:
                u += 1.0
            elif c == b:
                u += 0.5
                ties = True
    return u, ties


def _exact_counts(n: int, m: int) -> list[int]:
    """How many of the C(n+m, m) orderings give each U = 0..n*m (no ties).

    These are the coefficients of the Gaussian binomial [n+m choose m]_q, built as the product of
    (1 - q^(n+i)) / (1 - q^i) for i = 1..m, every step exact in integers.
    """
    size = n * m + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        k = n + i
        for u in range(size - 1, k - 1, -1):  # multiply by (1 - q^k)
            c[u] -= c[u - k]
        for u in range(i, size):  # divide by (1 - q^i)
            c[u] += c[u - i]
    return c


def _normal_p(u: float, base: Sequence[float], cand: Sequence[float]) -> tuple[float, float]:
    """One-sided p-values from the normal approximation, tie-corrected, continuity-corrected."""
    n, m = len(base), len(cand)
    mean = n * m / 2
    counts: dict[float, int] = {}
    for x in (*base, *cand):
        counts[x] = counts.get(x, 0) + 1
    total = n + m
    tie_term = sum(t**3 - t for t in counts.values()) / (total * (total - 1))
    var = n * m / 12 * ((total + 1) - tie_term)
    if var <= 0:
        return 1.0, 1.0
    sd = math.sqrt(var)
    z_greater = (u - mean - 0.5) / sd
    z_less = (mean - u - 0.5) / sd
    return 0.5 * math.erfc(z_greater / math.sqrt(2)), 0.5 * math.erfc(z_less / math.sqrt(2))


def mann_whitney(base: Sequence[float], cand: Sequence[float]) -> MannWhitney:
    """Mann-Whitney U of the candidate against the baseline, both one-sided p-values."""
    if not base or not cand:
        raise ValueError("both samples need at least one value")
    u, ties = _u_statistic(base, cand)
    n, m = len(base), len(cand)
    if not ties and max(n, m) <= EXACT_MAX_N:
        counts = _exact_counts(n, m)
        total = math.comb(n + m, m)
        k = round(u)
        p_greater = sum(counts[k:]) / total
        p_less = sum(counts[: k + 1]) / total
        return MannWhitney(u, min(1.0, p_greater), min(1.0, p_less), True)
    p_greater, p_less = _normal_p(u, base, cand)
    return MannWhitney(u, min(1.0, p_greater), min(1.0, p_less), False)


def hodges_lehmann(base: Sequence[float], cand: Sequence[float]) -> float:
    """The median of all differences candidate - baseline: the shift the test is about."""
    return float(statistics.median(c - b for c in cand for b in base))


def relative_change(base: float, cand: float) -> float:
    """cand / base - 1, and 0 when the baseline is 0 (nothing to be relative to)."""
    return cand / base - 1.0 if base else 0.0
