"""Host timing noise: a slower step that only the machine's host side explains.

When a CI runner's CPU is shared, throttled or busier, every Python dispatch and every
``cudaLaunchKernel`` takes longer. In a launch-bound step that stretches the step although the
code and the GPU work are identical. The gate reports such a change and does not fail on it when
all of these hold:

* the GPU did the same work: the same kernel mix (weighted Jaccard >= `SAME_KERNELS`), GPU-busy
  time within `gpu_tolerance` of the baseline, and no kernel category's time moved by more than
  that share of all kernel time;
* the host made the same calls: launches, API calls, synchronizations and copies per step equal;
* the slowdown is spread over every launch: the typical (p25 and p50) host time between two
  launches grew by at least half the step-time change. Slower code concentrates in a few places
  (one new host function, one stall) and leaves the typical launch gap alone.

Failing any of them keeps the step-time regression: fail closed.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.gate.inputs import GateInput
from advisor.gate.stats import relative_change
from advisor.gate.workload import name_mix, weighted_jaccard

SAME_KERNELS = 0.97
SAME_COUNTS = ("launches", "graph_launches", "api_calls", "sync_calls", "copies", "pageable_copies")
COUNT_TOLERANCE = 0.02  # relative, for counts that are medians over steps
UNIFORM_SHARE = 0.5  # the typical launch gap grew by at least this share of the step change


@dataclass(frozen=True)
class HostNoise:
    is_noise: bool
    reasons: tuple[str, ...]  # the evidence either way, one line each


def gpu_tolerance(threshold: float) -> float:
    """GPU-busy change still counted as "the same GPU work": 2%, less under a tight threshold."""
    return min(0.02, threshold / 2)


def _category_shift(base: GateInput, cand: GateInput) -> tuple[str, float] | None:
    """The kernel category whose GPU time moved most, as a share of all kernel time.

    GPU-busy time alone hides work that overlaps other streams: a collective that now waits
    three times as long for its peer barely moves the busy union.
    """
    total = sum(base.categories_ms.values())
    if not total:
        return None
    keys = set(base.categories_ms) | set(cand.categories_ms)
    deltas = {k: cand.categories_ms.get(k, 0.0) - base.categories_ms.get(k, 0.0) for k in keys}
    worst = max(deltas, key=lambda k: abs(deltas[k]))
    return worst, deltas[worst] / total


def _same_counts(base: GateInput, cand: GateInput) -> str | None:
    for k in SAME_COUNTS:
        b, c = base.counts.get(k), cand.counts.get(k)
        if b is None or c is None:
            continue
        if abs(c - b) > max(0.5, COUNT_TOLERANCE * b):
            return f"{k} per step changed ({b:g} -> {c:g})"
    return None


def host_noise(base: GateInput, cand: GateInput, step_change: float, threshold: float) -> HostNoise:
    """Whether a step-time increase of ``step_change`` is the host machine's noise."""
    why: list[str] = []
    if not (base.kernels_complete and cand.kernels_complete and base.counts and cand.counts
            and base.gpu_busy_ms and cand.gpu_busy_ms):
        return HostNoise(False, ("an input lacks per-step counts or GPU-busy times",))
    similarity = weighted_jaccard(name_mix(base.kernels), name_mix(cand.kernels))
    if similarity < SAME_KERNELS:
        return HostNoise(False, (f"the kernel mix changed ({similarity:.0%} similar by name)",))
    tolerance = gpu_tolerance(threshold)
    busy = relative_change(base.median_busy_ms or 0.0, cand.median_busy_ms or 0.0)
    if abs(busy) > tolerance:
        return HostNoise(False, (f"GPU-busy time changed {busy:+.1%}",))
    moved = _category_shift(base, cand)
    if moved is not None and abs(moved[1]) > tolerance:
        return HostNoise(False, (f"GPU time in {moved[0]} kernels changed by {moved[1]:+.1%} of "
                                 "the step's kernel time",))
    why.append(f"same kernels, GPU-busy time {busy:+.1%}")
    counts = _same_counts(base, cand)
    if counts:
        return HostNoise(False, (*why, counts))
    why.append("same launches, API calls, synchronizations and copies per step")
    b, c = base.launch_interval_ms, cand.launch_interval_ms
    if not all(k in b and k in c and b[k] > 0 for k in ("p25", "p50")):
        return HostNoise(False, (*why, "no host launch timing to show the slowdown is uniform"))
    growth = min(relative_change(b["p25"], c["p25"]), relative_change(b["p50"], c["p50"]))
    needed = UNIFORM_SHARE * step_change
    if growth < needed:
        return HostNoise(False, (*why, f"the typical host time per launch grew {growth:+.1%}, "
                                       f"less than half the step change: the slowdown is local"))
    why.append(f"the host time per launch grew {growth:+.1%} across launches (p25 and p50)")
    return HostNoise(True, tuple(why))
