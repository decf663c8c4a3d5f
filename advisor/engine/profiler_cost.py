"""The tracing profiler's own host cost, and taking it out of a replay.

A profiler slows the host down (callbacks on every CUDA call, a record per framework operator)
but not the GPU, so a launch-bound step looks slower in a trace than it runs, and every fix that
frees the host looks better than it is. The replay (`advisor.engine.whatif`) removes a measured
cost per CUDA call of the program and per traced operator, which depends on the profiler and on
how it was configured; `detect` reads both off the trace and `CALIBRATIONS` holds the costs
measured for each on the H100. `benchmarks/profiler_calibration.py` holds three launch-bound
workloads built only to calibrate (each timed without a profiler and captured under every
configuration) and `benchmarks/unprofiled_check.py fit` fits the costs on them (non-negative
least squares of replayed traced step - plain step over the per-step event counts), so that the
checks in docs/validation.md run on captures disjoint from the fit. The with-stack costs hold
only as far as the captures they were fitted on (`Calibration.fitted_ratio`): a correction that
goes further (`out_of_range`) is reported, and the estimates on it withheld
(`advisor.analysis`).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from advisor.graph.model import RangeSource

if TYPE_CHECKING:
    from advisor.engine.whatif import Simulation
    from advisor.graph.model import OpGraph, Step

CALL_FLOOR_NS = 1_000
"""The least a CUDA call costs the host without a profiler."""

PROFILER_CALLS = ("cuKernelGetName", "cuKernelGetAttribute", "cuFuncGetName")
"""Driver calls the profiler itself makes once per launch to name kernels: not the program's."""


@dataclass(frozen=True)
class Calibration:
    """Host cost a profiler configuration adds per event of the program (ns)."""

    profiler: str  # "nsys", "torch.profiler", or "none"
    config: str  # what was traced, as detected from the trace
    call_ns: int  # per CUDA runtime/driver call of the program
    op_ns: int  # per framework operator the profiler recorded (torch.profiler)
    measured: str  # where the costs come from
    py_ns: int = 0  # per Python call the profiler recorded (torch.profiler with_stack)
    expected_error: float | None = None
    """Root-mean-square relative error of the unprofiled step predicted with these costs, on
    H100 captures whose step was also measured without the profiler and that the costs were not
    fitted on; None where not checked. What a bare trace's figures are good to."""
    fitted_ratio: float | None = None
    """The range the costs were fitted on: the largest traced / unprofiled step (the replay of
    the trace as recorded over the step measured without the profiler) among the captures they
    were fitted on; None where not recorded. A correction that takes a trace's step further
    down than that (`out_of_range`) extrapolates."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


NO_CALIBRATION = Calibration("none", "nothing removed", 0, 0, "")

_NSYS = ("H100 80GB HBM3, torch 2.11+cu130, nsys 2025.3.1 (cuda,nvtx,osrt,cublas,cudnn): "
         "(median step under nsys - median step without a profiler) / program calls per step in "
         "the host-bound captures of fixtures/scenarios: uncaptured-cuda-graph/bad 6.9 us, "
         "unfused-attention/good 7.6, unfused-attention/bad about 16, cpu-bound-loss/bad 17.3; "
         "median 11 us")
_KINETO = ("H100 80GB HBM3, torch 2.11+cu130, torch.profiler record_shapes=True: same method per "
           "aten operator: rng-bound-dropout/good 2.1 us, unfused-attention/good 2.3, "
           "uncaptured-cuda-graph/bad 2.9, cpu-bound-loss/bad 6.0, median 2.5 us; CUPTI's cost "
           "per CUDA call 2 us")
_KINETO_STACK = ("H100 80GB HBM3, torch 2.11+cu130, torch.profiler record_shapes=True, "
                 "with_stack=True (advisor profile's default), 2026-11-23: fitted by the replay "
                 "(least squares of its relative error) on 12 advisor profile captures in two "
                 "device runs, each against its own steps measured outside the window: nanoGPT "
                 "train.py, an HF Trainer and a Lightning loop, the uncaptured-cuda-graph, "
                 "cpu-bound-loss, host-sync and compiler-fusion scenarios "
                 "(benchmarks/profiler_cost_fit.py fit fixtures/archive/unprofiled/h100-2026-11-23d/run1 "
                 ".../run2; 26.0 us per call there, within its noise). Errors of the fitted "
                 "replay: RMS 13.0%, worst 26%; with each workload left out of the fit: RMS 23%, "
                 "worst 55% (a Lightning step of 4 ms, traced at 11); on a third run no fit saw: "
                 "RMS 21%, worst 38%. Two runs of one workload differed by up to 40% in traced / "
                 "unprofiled step (cpu-bound-loss 2.44 and 1.75), which no per-event cost "
                 "follows. Measured alone (profiler_calibration.py's single-event workloads), "
                 "a Python call costs 0.2-0.5 us, an operator about 4 and a launch about 8 more: "
                 "framework code costs the tracer more per event than those loops, and the "
                 "per-call figure here also stands for host time the replay cannot place")
_NSYS_APIS = ("H100 80GB HBM3, torch 2.11+cu130, nsys 2025.3.1: the cuda,nvtx,osrt,cublas,cudnn "
              "cost (11 us per CUDA call, fitted on the scenarios' host-bound captures), kept for "
              "this configuration too: on the calibration and framework workloads of "
              "benchmarks/unprofiled_check.py (fixtures/archive/unprofiled/h100-2026-11-23b) least "
              "squares gave 13.6 us with the OS-runtime, cuBLAS and cuDNN APIs traced and 9.6 us "
              "without them (unprofiled_check.py fit --rows .../fit_rows.json), both within the "
              "+-20-35% the machine's host speed varies between processes (docs/validation.md)")
STACK_FITTED_RATIO = 3.01
"""The largest traced / unprofiled step among the twelve captures the with-stack costs were
fitted on (fixtures/archive/unprofiled/h100-2026-11-23d/run1, run2; the trace's step replayed as
recorded over `advisor profile`'s measured step): fw-lightning in run 1, 11.34 ms traced against
3.77 measured. The others: 1.18 (host-sync) to 2.48 (cpu-bound-loss); the costs themselves take
those steps down by at most 2.79x (fw-lightning, run 2)."""

CALIBRATIONS: dict[tuple[str, str], Calibration] = {
    # expected errors: docs/validation.md, issue 14's tables (predicted from the bare trace
    # against the step measured without a profiler, captures the costs were not fitted on;
    # cuda,nvtx: the six workloads of fixtures/archive/unprofiled/h100-2026-11-23d/run3)
    ("nsys", "cuda,nvtx"): Calibration("nsys", "cuda,nvtx", 11_000, 0, _NSYS_APIS,
                                       expected_error=0.13),
    ("nsys", "cuda,nvtx,osrt,cublas,cudnn"): Calibration("nsys", "cuda,nvtx,osrt,cublas,cudnn",
                                                         11_000, 0, _NSYS, expected_error=0.11),
    ("torch.profiler", "shapes"): Calibration("torch.profiler", "shapes", 2_000, 2_500, _KINETO,
                                              expected_error=0.29),
    ("torch.profiler", "shapes,stack"): Calibration("torch.profiler", "shapes,stack", 25_800,
                                                    1_310, _KINETO_STACK, py_ns=1_310,
                                                    expected_error=0.23,
                                                    fitted_ratio=STACK_FITTED_RATIO),
}
"""Measured costs per (profiler, configuration). nsys with Python backtraces costs more per
event and has not been measured yet: it takes the cheaper configuration's costs and says so in
``measured``, and the measured-vs-replay check of `advisor profile` shows how far off that is."""


def _unmeasured(base: Calibration, config: str) -> Calibration:
    return Calibration(base.profiler, config, base.call_ns, base.op_ns,
                       f"not measured for {config}: the {base.config} costs ({base.measured})")


def detect(graph: OpGraph) -> Calibration:
    """The calibration for the profiler and configuration that recorded this trace."""
    fmt = graph.info.format
    if fmt == "nsys-sqlite":
        base = config = _nsys_config(graph.info.software.get("nsys_traced", ""))
        if graph.info.software.get("nsys_python_backtrace") == "yes":
            config += ",python-backtrace"
        if any(r.source is RangeSource.OPERATOR for r in graph.ranges):
            # PyTorch's operator ranges (``--pytorch=autograd-nvtx``): an NVTX push and pop
            # per operator, on top of the CUDA calls the costs below were measured on
            config += ",autograd-nvtx"
        if graph.info.totals.get("python_samples"):  # advisor's own stack sampler ran in the
            config += ",pystacks"  # window (advisor.capture.pystacks): its cost is not measured
        return CALIBRATIONS.get(("nsys", config)) or _unmeasured(
            CALIBRATIONS.get(("nsys", base), CALIBRATIONS[("nsys", "cuda,nvtx")]), config)
    if fmt == "kineto-json":
        config = "shapes,stack" if graph.info.totals.get("python_functions", 0) > 0 else "shapes"
        cal = CALIBRATIONS.get(("torch.profiler", config)) or _unmeasured(
            CALIBRATIONS[("torch.profiler", "shapes")], config)
        if config == "shapes,stack" and _runs_compiled_code(graph):
            cal = replace(cal, config="shapes,stack,compiled", py_ns=COMPILED_PY_NS,
                          expected_error=COMPILED_STACK_ERROR,
                          fitted_ratio=max(cal.fitted_ratio or 0.0, COMPILED_FITTED_RATIO),
                          measured=f"{_COMPILED_STACK}; the other costs: {cal.measured}")
        return cal
    return NO_CALIBRATION


COMPILED_PY_NS = 4_780
COMPILED_STACK_ERROR = 0.23
COMPILED_FITTED_RATIO = 3.05
"""The largest traced / unprofiled step of the three compiled captures the Python-call cost was
fitted on (nanoGPT --compile=True: 52.11 ms traced, 17.09 measured; HF run_clm.py compiled 3.03,
compiler-fusion compiled 2.68; docs/validation.md, fourth pass). A compiled step's other costs
are the eager fit's (`STACK_FITTED_RATIO`): its range is the wider of the two."""
_COMPILED_STACK = ("torch.compile's generated code costs the stack tracer more per Python call "
                   "than the eager code the other costs were fitted on: with them, the replay of "
                   "three compiled steps under advisor profile on the H100 left +64 to +78% "
                   "(nanoGPT train.py --compile=True, the compiler-fusion scenario compiled, HF "
                   "run_clm.py GPT-2 bf16 --torch_compile True; fixtures/archive/unprofiled/"
                   "h100-2026-11-23d/public). 4.78 us per Python call (the mean of the three "
                   "costs that fit each step exactly, 3.75, 4.58, 6.02; benchmarks/"
                   "profiler_cost_fit.py python-cost) leaves -24, 0 and +14%; each left out of "
                   "the mean: -32, 0 and +22%, RMS 22.5%")
"""A compiled step traced with stacks: the Python-call cost measured on compiled steps, and what
the step is good to with it (each step's error with the cost fitted on the other two)."""


def _runs_compiled_code(graph: OpGraph) -> bool:
    """Whether the trace holds torch.compile's generated-code ranges (`COMPILED_GRAPH_CALLS`)."""
    from advisor.graph.queries import COMPILED_GRAPH_CALLS

    return any(r.name.startswith(COMPILED_GRAPH_CALLS) for r in graph.ranges)


_NSYS_HOST_APIS = {"OSRuntime": "osrt", "CuBLAS": "cublas", "CuDNN": "cudnn"}
"""Host-side APIs nsys can trace beside CUDA and NVTX (META_DATA_CAPTURE names), each costing
the host per intercepted call."""


def _nsys_config(traced: str) -> str:
    """The calibration key for what the capture traced (``software.nsys_traced``). Exports that
    do not say (older nsys) are read as the wider set, nsys's own default for PyTorch users."""
    names = set(traced.split(",")) if traced else set(_NSYS_HOST_APIS)
    extra = [short for name, short in _NSYS_HOST_APIS.items() if name in names]
    if not extra:
        return "cuda,nvtx"
    return "cuda,nvtx," + ",".join(extra) if len(extra) < 3 else "cuda,nvtx,osrt,cublas,cudnn"


def out_of_range(cal: Calibration, traced_ns: float, corrected_ns: float) -> str | None:
    """Why the correction of a step leaves the range ``cal`` was fitted on, or None.

    The costs are fitted on captures whose traced step was at most ``cal.fitted_ratio`` times
    the step measured without the profiler. Removed from a trace whose host work between CUDA
    calls is shorter than the charge per call (small eager steps: a few microseconds between
    calls against 25.8 us charged per call with stacks), every such gap is clamped to zero and
    the host is modelled as dispatching each operator in no time: the replay then takes the step
    down further than the profiler slowed any capture the costs were fitted on, and every
    estimate on it (host-bound or GPU-bound, what a fix of the host saves) is extrapolated.
    ``traced_ns`` and ``corrected_ns``: the analysed steps replayed as recorded and with the
    costs removed (medians, as the fit compared them)."""
    if cal.fitted_ratio is None or traced_ns <= 0:
        return None
    ratio = traced_ns / corrected_ns if corrected_ns > 0 else float("inf")
    if ratio <= cal.fitted_ratio:
        return None
    return (f"the profiler-overhead correction ({cal.profiler} {cal.config}: "
            f"{cal.call_ns / 1e3:g} us per CUDA call, {cal.op_ns / 1e3:g} per operator, "
            f"{cal.py_ns / 1e3:g} per Python call) takes the traced step of "
            f"{traced_ns / 1e6:.2f} ms down to {corrected_ns / 1e6:.2f} ms, {ratio:.2f}x: beyond "
            f"the {cal.fitted_ratio:.2f}x the profiler slowed any capture those costs were "
            "fitted on, so the unprofiled step is extrapolated (as where the cost charged per "
            "CUDA call exceeds the host time between the calls of a small eager step)")


def remove(sim: Simulation, cal: Calibration) -> None:
    """Take ``cal``'s per-event costs out of the simulation's host chain.

    A call's cost lands in the call (callbacks on entry and exit) and in the host time just
    before it: it comes out of the call down to `CALL_FLOOR_NS`, the rest out of the gap. An
    operator's record lands in the host time between calls: it comes out of the gap it falls in.
    """
    # Written column by column (every node of the window changes; -1 stands for None in the
    # ``wait_op`` and ``overlap_from`` columns): the columns the recorded replay read become
    # the template's, built once (`Simulation.seal`).
    c = sim.seal()
    dur, gap = c.own("dur"), c.own("gap")
    wait_op, overlap_from = c.wait_op, c.overlap_from
    for i, node in enumerate(sim.nodes.base):
        call = node.call
        if call is None:
            continue
        if call.name in PROFILER_CALLS:
            dur[i] = 0
            continue
        d = dur[i]
        floor = min(d, CALL_FLOOR_NS)
        from_call = 0 if wait_op[i] >= 0 else min(cal.call_ns, d - floor)
        dur[i] = d - from_call
        if overlap_from[i] < 0:
            gap[i] = max(0, gap[i] - (cal.call_ns - from_call))
    for per_event, starts in ((cal.op_ns, _operator_starts), (cal.py_ns, _python_starts)):
        if not per_event:
            continue
        event_starts = starts(sim.graph, sim.pid)
        if not event_starts:
            continue
        for i, (g, ovf, obs, since) in enumerate(zip(gap, overlap_from, c.obs_start, c.gap_from)):
            if ovf < 0 and g > 0:
                k = bisect_left(event_starts, obs) - bisect_left(event_starts, since)
                gap[i] = max(0, g - k * per_event)


def _operator_starts(graph: OpGraph, pid: int) -> list[int]:
    return sorted(r.start_ns for r in graph.ranges  # (members compared: ``.value`` is a call)
                  if r.pid == pid and r.source is RangeSource.OPERATOR)


def _python_starts(graph: OpGraph, pid: int) -> list[int]:
    """Python calls recorded by ``with_stack`` (their record lands between CUDA calls, as an
    operator's does)."""
    return sorted(r.start_ns for r in graph.ranges
                  if r.pid == pid and r.source is RangeSource.PYTHON)


def per_step_counts(graph: OpGraph, steps: Sequence[Step]) -> dict[str, float]:
    """Median per step of the program's CUDA calls, its launches, traced operators and traced
    Python calls."""
    from advisor.graph.api_names import is_launch

    if not steps:
        return {"calls": 0.0, "launches": 0.0, "ops": 0.0, "pys": 0.0}
    pid = steps[0].pid
    calls = sorted((a.start_ns, is_launch(a.name)) for a in graph.api_calls
                   if a.pid == pid and a.name not in PROFILER_CALLS)
    starts = [c[0] for c in calls]
    ops = _operator_starts(graph, pid)
    pys = _python_starts(graph, pid)
    c, la, o, py = [], [], [], []
    for s in steps:
        i, j = bisect_left(starts, s.cpu_start_ns), bisect_left(starts, s.cpu_end_ns)
        c.append(j - i)
        la.append(sum(1 for _, launch in calls[i:j] if launch))
        o.append(bisect_left(ops, s.cpu_end_ns) - bisect_left(ops, s.cpu_start_ns))
        py.append(bisect_left(pys, s.cpu_end_ns) - bisect_left(pys, s.cpu_start_ns))
    return {"calls": float(statistics.median(c)), "launches": float(statistics.median(la)),
            "ops": float(statistics.median(o)), "pys": float(statistics.median(py))}
