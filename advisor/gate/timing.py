"""The step-time verdict: a change must be both larger than the threshold and significant.

The threshold alone would fail a noisy run on one stalled step; the test alone would fail a real
but negligible 0.3% change when a run has hundreds of steps. Requiring both is what a reviewer
would ask: "is it slower, and by enough to matter?"

Fail closed: a change larger than the threshold that the test cannot separate from the runs'
noise is "noisy" (exit 2, capture more steps), and fewer than `MIN_STEPS` steady steps on a side
is "too few steps" (exit 2): with four steps against four, no ordering is rare enough to count as
evidence (the smallest one-sided p-value is 1/70 only if every step agrees).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from advisor.gate.stats import MannWhitney, hodges_lehmann, mann_whitney, relative_change

MIN_STEPS = 5
ALPHA = 0.05


@dataclass(frozen=True)
class Timing:
    base_median_ms: float
    cand_median_ms: float
    change: float  # median ratio - 1
    shift_ms: float  # Hodges-Lehmann shift, candidate - baseline
    test: MannWhitney
    n_base: int
    n_cand: int
    verdict: str  # "slower", "faster", "unchanged", "noisy" or "too few steps"
    source: str = "steady steps"  # which steps: the profiled ones, or the plain --try runs'

    @property
    def p_value(self) -> float:
        """The one-sided p-value in the direction the medians moved."""
        return self.test.p_greater if self.change >= 0 else self.test.p_less

    def describe(self) -> str:
        return (f"{self.change:+.1%} ({self.base_median_ms:.3f} -> {self.cand_median_ms:.3f} ms "
                f"median over {self.n_base} and {self.n_cand} {self.source}; Mann-Whitney "
                f"p={self.p_value:.2g})")


def compare_timing(base_ms: tuple[float, ...], cand_ms: tuple[float, ...], threshold: float,
                   alpha: float = ALPHA, min_steps: int = MIN_STEPS,
                   source: str = "steady steps") -> Timing:
    b_med = float(statistics.median(base_ms))
    c_med = float(statistics.median(cand_ms))
    change = relative_change(b_med, c_med)
    test = mann_whitney(base_ms, cand_ms)
    if min(len(base_ms), len(cand_ms)) < min_steps:
        verdict = "too few steps"
    elif change > threshold:
        verdict = "slower" if test.p_greater < alpha else "noisy"
    elif change < -threshold and test.p_less < alpha:
        verdict = "faster"
    else:
        verdict = "unchanged"
    return Timing(b_med, c_med, change, hodges_lehmann(base_ms, cand_ms), test, len(base_ms),
                  len(cand_ms), verdict, source)
