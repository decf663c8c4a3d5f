"""Host timing noise: a slower step that only the machine's host side explains.

When a CI runner's CPU is shared, throttled or busier, every Python dispatch and every
``cudaLaunchKernel`` takes longer. In a launch-bound step that stretches the step although the
code and the GPU work are identical. The gate reports such a change and does not fail on it when
all of these hold:

* the GPU did the same work: the same kernel mix (weighted Jaccard >= `SAME_KERNELS`), GPU-busy
  time within `gpu_tolerance` of the baseline, and no kernel category's time moved by more than
  that share of all kernel time (copies from pageable memory run at the host's memcpy speed:
  when both runs make the same ones, their time counts as host time);
* the host made no more calls: launches, API calls, synchronizations and copies per step did not
  grow (fewer is fine: less host work cannot make the host slower);
* the slowdown is spread over every launch: the median host time between two launches grew by at
  least half the step-time change. Slower code concentrates in a few places (one new host
  function, one stall) and leaves the typical launch gap alone.

Failing any of them keeps the step-time regression: fail closed.

`profiler_host_only` is the torch.profiler case: that profiler adds host time to every operator
and launch, so a step that got slower only on the host, with no more GPU work and no more host
calls, cannot be judged from its traces: the gate says so (exit 2) and asks for nsys captures.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.gate.inputs import GateInput
from advisor.gate.stats import relative_change
from advisor.gate.workload import name_mix, weighted_jaccard

SAME_KERNELS = 0.97
HOST_CALLS = ("launches", "graph_launches", "api_calls", "sync_calls", "copies", "pageable_copies")
COUNT_TOLERANCE = 0.02  # relative, for counts that are medians over steps
UNIFORM_SHARE = 0.5  # the typical launch gap grew by at least this share of the step change


@dataclass(frozen=True)
class HostNoise:
    is_noise: bool
    reasons: tuple[str, ...]  # the evidence either way, one line each


def gpu_tolerance(threshold: float) -> float:
    """GPU-busy change still counted as "the same GPU work": 2%, less under a tight threshold."""
    return min(0.02, threshold / 2)


def _host_paced(base: GateInput, cand: GateInput) -> frozenset[str]:
    """GPU-timeline categories that run at the host's pace in both runs.

    A copy from pageable memory is staged by the driver through a pinned buffer with a CPU
    memcpy: its duration on the GPU timeline is the host's memory bandwidth. When both runs make
    the same pageable copies, their copy time is host time for this comparison.
    """
    b, c = base.counts.get("pageable_copies", 0), cand.counts.get("pageable_copies", 0)
    return frozenset({"copy"}) if b > 0 and b == c else frozenset()


def _gpu_busy_change(base: GateInput, cand: GateInput) -> float:
    """Relative GPU-busy change, host-paced copy time taken out."""
    b, c = base.median_busy_ms or 0.0, cand.median_busy_ms or 0.0
    for k in _host_paced(base, cand):
        b -= base.categories_ms.get(k, 0.0)
        c -= cand.categories_ms.get(k, 0.0)
    return relative_change(b, c) if b > 0 else 0.0


def _category_shift(base: GateInput, cand: GateInput) -> tuple[str, float] | None:
    """The kernel category whose GPU time moved most, as a share of all kernel time.

    GPU-busy time alone hides work that overlaps other streams: a collective that now waits
    three times as long for its peer barely moves the busy union.
    """
    total = sum(base.categories_ms.values())
    if not total:
        return None
    keys = (set(base.categories_ms) | set(cand.categories_ms)) - _host_paced(base, cand)
    if not keys:
        return None
    deltas = {k: cand.categories_ms.get(k, 0.0) - base.categories_ms.get(k, 0.0) for k in keys}
    worst = max(deltas, key=lambda k: abs(deltas[k]))
    return worst, deltas[worst] / total


def _more_calls(base: GateInput, cand: GateInput) -> str | None:
    for k in HOST_CALLS:
        b, c = base.counts.get(k), cand.counts.get(k)
        if b is None or c is None:
            continue
        if c - b > max(0.5, COUNT_TOLERANCE * b):
            return f"{k} per step grew ({b:g} -> {c:g})"
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
    busy = _gpu_busy_change(base, cand)
    paced = " (pageable copies counted as host time)" if _host_paced(base, cand) else ""
    if abs(busy) > tolerance:
        return HostNoise(False, (f"GPU-busy time changed {busy:+.1%}{paced}",))
    moved = _category_shift(base, cand)
    if moved is not None and abs(moved[1]) > tolerance:
        return HostNoise(False, (f"GPU time in {moved[0]} kernels changed by {moved[1]:+.1%} of "
                                 "the step's kernel time",))
    why.append(f"same kernels, GPU-busy time {busy:+.1%}{paced}")
    counts = _more_calls(base, cand)
    if counts:
        return HostNoise(False, (*why, counts))
    why.append("no more launches, API calls, synchronizations or copies per step")
    b, c = base.launch_interval_ms, cand.launch_interval_ms
    if not (b.get("p50", 0) > 0 and "p50" in c):
        return HostNoise(False, (*why, "no host launch timing to show the slowdown is uniform"))
    growth = relative_change(b["p50"], c["p50"])
    if growth < UNIFORM_SHARE * step_change:
        return HostNoise(False, (*why, f"the median host time between launches grew {growth:+.1%}, "
                                       "less than half the step change: the slowdown is local"))
    why.append(f"the median host time between launches grew {growth:+.1%}: every launch is slower")
    return HostNoise(True, tuple(why))


def _gpu_not_slower(base: GateInput, cand: GateInput, threshold: float) -> str | None:
    """Why the GPU did more work in the candidate, or None when it did not."""
    tolerance = gpu_tolerance(threshold)
    if base.median_busy_ms is None or cand.median_busy_ms is None:
        return "no GPU-busy times"
    busy = relative_change(base.median_busy_ms, cand.median_busy_ms)
    if busy > tolerance:
        return f"GPU-busy time grew {busy:+.1%}"
    moved = _category_shift(base, cand)
    if moved is not None and moved[1] > tolerance:
        return f"GPU time in {moved[0]} kernels grew"
    return None


def profiler_host_only(base: GateInput, cand: GateInput, threshold: float) -> str | None:
    """For torch.profiler captures: the reason a host-only slowdown cannot be judged, or None."""
    if not (base.trace_format == cand.trace_format == "kineto-json"):
        return None
    if _gpu_not_slower(base, cand, threshold) is not None or _more_calls(base, cand):
        return None
    busy = relative_change(base.median_busy_ms or 0.0, cand.median_busy_ms or 0.0)
    return (f"the step is slower only on the host (GPU-busy time {busy:+.1%}, no more launches "
            "or API calls) in torch.profiler captures, whose per-operator overhead inflates host "
            "time: capture both runs with nsys (`advisor profile --nsys`) to decide")
