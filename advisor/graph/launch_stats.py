"""Kernel launch statistics and the same kernel's spread across steps (HTA's kernel-launch and
kernel-variability views, on the analysed steps).

* **Launch-to-start delay**: from the start of the host call that enqueued a kernel to the
  kernel's start on the GPU. A short delay on most kernels means the GPU waits for the host
  (launch-bound); a long one means a queue of work ahead of it (the host runs ahead, as it
  should). Reported as a distribution (p10, p50, p90, max), not a mean: the two regimes mix.
* **Launch call and shorter-than-launch kernels** (HTA's ``get_cuda_kernel_launch_stats``, its
  "short GPU kernels"): the host call's own duration (p50, p90, max) and the share of kernels
  whose GPU time is shorter than the call that launched them. One thread cannot keep the GPU
  busy with such kernels: the GPU finishes each before the host has enqueued the next, so a
  high share says launch-bound before any replay does. Under torch.profiler the calls carry the
  profiler's own cost (`advisor.engine.profiler_cost`), so the share is an upper bound there.
* **Variability**: a kernel (by name and grid) launched in every analysed step, its time per
  step across steps: the spread (max - min over the median) says whether a step-to-step
  difference comes from the GPU's work itself (clocks, contention, data-dependent kernels) or
  from around it. Per step, a kernel launched once per layer sums its launches, which hides how
  its single launches vary; so each also carries its launches per step and the p50/p90/max of
  one launch (nsys-ai's min/avg/max per kernel name, per name and grid here). Where the grid
  does not follow the problem (Hopper's persistent cuBLAS GEMMs launch one block per SM pair
  whatever the sizes), one name and grid covers several GEMMs, and the single launches' spread
  is theirs, not the GPU's: the per-step spread stays the variability figure.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.graph.kernels import short_name
from advisor.graph.model import GpuOpKind, OpGraph, Step


def _quantile(sorted_values: Sequence[int], q: float) -> int:
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))]


@dataclass(frozen=True)
class KernelSpread:
    kernel: str
    grid: tuple[int, int, int] | None
    median_ns: float  # time per step
    min_ns: int
    max_ns: int
    launches: int = 0  # single launches over the analysed steps
    instance_ns: tuple[int, int, int] | None = None  # one launch: p50, p90, max

    @property
    def spread(self) -> float:
        return (self.max_ns - self.min_ns) / self.median_ns if self.median_ns else 0.0


@dataclass(frozen=True)
class LaunchStats:
    kernels_per_step: float
    delays_ns: tuple[int, int, int, int] | None  # p10, p50, p90, max; None: no traced launches
    launched: int  # kernels whose launch call is in the trace
    variability: tuple[KernelSpread, ...]
    call_ns: tuple[int, int, int] | None = None  # launch call duration: p50, p90, max
    shorter_than_launch: float | None = None  # share of launched kernels shorter than the call

    def to_dict(self, top: int = 10) -> dict:
        d = self.delays_ns
        return {
            "kernels_per_step": round(self.kernels_per_step, 2),
            "launch_to_start_us": None if d is None else
            {k: round(v / 1e3, 2) for k, v in zip(("p10", "p50", "p90", "max"), d, strict=True)},
            "launches_traced": self.launched,
            "launch_call_us": None if self.call_ns is None else
            {k: round(v / 1e3, 2) for k, v in zip(("p50", "p90", "max"), self.call_ns,
                                                   strict=True)},
            "shorter_than_launch": (None if self.shorter_than_launch is None
                                    else round(self.shorter_than_launch, 4)),
            "variability": [
                {"kernel": v.kernel, "grid": list(v.grid) if v.grid else None,
                 "median_ms": round(v.median_ns / 1e6, 4), "min_ms": round(v.min_ns / 1e6, 4),
                 "max_ms": round(v.max_ns / 1e6, 4), "spread": round(v.spread, 3),
                 "launches": v.launches,
                 "launch_us": None if v.instance_ns is None else
                 {k: round(x / 1e3, 2) for k, x in zip(("p50", "p90", "max"), v.instance_ns,
                                                       strict=True)}}
                for v in self.variability[:top]],
        }


def launch_stats(graph: OpGraph, steps: Sequence[Step]) -> LaunchStats | None:
    """Launch delays and kernel variability over ``steps`` (None without steps)."""
    if not steps:
        return None
    delays: list[int] = []
    calls: list[int] = []
    short = 0
    per_step: dict[tuple, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    single: dict[tuple, list[int]] = defaultdict(list)
    count = 0
    for i, s in enumerate(steps):
        # every thread of the step's process: the backward's kernels are launched by autograd's
        # own thread
        for op in graph.process_ops_launched_in(s.pid, s.cpu_start_ns, s.cpu_end_ns):
            if op.kind is not GpuOpKind.KERNEL:
                continue
            count += 1
            call = graph.launcher(op)
            if call is not None:
                delays.append(max(0, op.start_ns - call.start_ns))
                calls.append(call.duration_ns)
                short += op.duration_ns < call.duration_ns
            per_step[(op.name, op.grid)][i] += op.duration_ns
            single[(op.name, op.grid)].append(op.duration_ns)
    delays.sort()
    calls.sort()
    spreads = []
    for (name, grid), by_step in per_step.items():
        if len(by_step) < len(steps) or len(steps) < 2:
            continue  # not in every step: a spread would mix presence with duration
        times = list(by_step.values())
        one = sorted(single[(name, grid)])
        spreads.append(KernelSpread(short_name(name), grid, statistics.median(times),
                                    min(times), max(times), len(one),
                                    (_quantile(one, 0.5), _quantile(one, 0.9), one[-1])))
    # the kernels whose spread costs the most time first
    spreads.sort(key=lambda v: -(v.max_ns - v.min_ns))
    return LaunchStats(
        count / len(steps),
        (*(_quantile(delays, q) for q in (0.1, 0.5, 0.9)), delays[-1]) if delays else None,
        len(delays), tuple(spreads),
        (*(_quantile(calls, q) for q in (0.5, 0.9)), calls[-1]) if calls else None,
        short / len(calls) if calls else None)
