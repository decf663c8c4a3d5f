"""The profiler's costs fitted to a measured step: the replay (`advisor.engine.whatif`) with a
calibration (`advisor.engine.profiler_cost`) removed, and the factor on that calibration that
makes it take the step `advisor profile` measured without the profiler.

Kept apart from `advisor.engine.profiler_cost`, which the replay itself reads (what a profiler
costs per event, and taking it out of a timeline): this module replays, so it sits above both.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.engine.context import analysed_steps
from advisor.engine.profiler_cost import Calibration, remove
from advisor.engine.whatif import Simulation
from advisor.graph.model import OpGraph, Step


def scaled(cal: Calibration, k: float, why: str) -> Calibration:
    """``cal`` with every per-event cost multiplied by ``k``."""
    return Calibration(cal.profiler, cal.config, int(cal.call_ns * k), int(cal.op_ns * k),
                       why, int(cal.py_ns * k))


MAX_SCALE = 6.0
"""The largest factor `fit_to_step` applies to a calibration: the costs calibrated on the H100
times six. The machine's host speed varies by tens of percent between processes
(docs/validation.md) and torch.compile's generated code costs the stack tracer about twice
what eager code does (HF run_clm.py bf16 + compile: 2.07x); a job that needs more is not the
profiler's overhead alone."""


def fit_to_step(graph: OpGraph, steps: Sequence[Step], cal: Calibration,
                measured_ns: float, tolerance: float = 0.01) -> tuple[Calibration, float]:
    """The calibration scaled so that the replay without the profiler's overhead takes the
    step that was measured without a profiler in the same process (`advisor profile`), and the
    factor. The replayed step shrinks as the removed cost grows, so a bisection on the factor
    finds it; the factor stays in [0, `MAX_SCALE`].

    Why: the costs per event were calibrated on other workloads and processes, and the host's
    speed varies between them (and torch.compile's generated code is traced at a different cost
    per call); the measured step of the same run is the ground truth a replay can be fitted to,
    which the estimates then rest on."""
    def replay(k: float) -> float:
        return replay_median_ns(graph, scaled(cal, k, cal.measured), steps)

    lo, hi = 0.0, MAX_SCALE
    if replay(hi) >= measured_ns:
        lo = hi
    elif replay(lo) <= measured_ns:
        hi = lo
    while hi - lo > tolerance:
        k = (lo + hi) / 2
        if replay(k) > measured_ns:
            lo = k
        else:
            hi = k
    k = round((lo + hi) / 2, 2)
    why = (f"{cal.profiler} ({cal.config}) costs scaled x{k:.2f} so that the replay takes the "
           f"{measured_ns / 1e6:.2f} ms step measured without the profiler in this run; the "
           f"calibrated costs: {cal.call_ns / 1e3:g} us per CUDA call, {cal.op_ns / 1e3:g} per "
           f"operator, {cal.py_ns / 1e3:g} per Python call ({cal.measured})")
    return scaled(cal, k, why), k


def replay_median_ns(graph: OpGraph, cal: Calibration,
                     steps: Sequence[Step] | None = None) -> float:
    """The median step replayed with ``cal`` removed (for fitting and checks); ``steps``: the
    analysed steps unless given."""
    if steps is None:
        steps = analysed_steps(graph)
    if not steps:
        return 0.0
    sim = Simulation(graph, steps)
    remove(sim, cal)
    return sim.run().median_ns
