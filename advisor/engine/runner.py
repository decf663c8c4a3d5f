"""Run the rules over a graph: check requirements, collect findings, estimate them together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from advisor.engine.combine import combined_estimate
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.framework import FrameworkInfo
from advisor.engine.host import HostFacts
from advisor.engine.rule import (
    MIN_SPREAD_STEPS,
    Estimate,
    Finding,
    Requirement,
    Rule,
    Skipped,
    skipped_by_reason,
)
from advisor.engine.step_basis import StepBasis
from advisor.gc_pause import gc_paused
from advisor.graph.model import GpuOpKind, OpGraph

MIN_SPEEDUP = 1.02
"""A fix that saves under 2% of the step is within run-to-run noise of a training step: such a
match is not reported as a finding (a healthy step must come out clean)."""


@dataclass(frozen=True)
class ReplayCheck:
    """How far the replay can be trusted on this trace: its own checks, kept apart from the
    findings so every report shows them the same way (JSON ``model_check``)."""

    baseline_error: float | None = None  # |replay - observed| / observed of the unmodified model
    profiler_overhead_ns: float | None = None  # host time per step the profiler itself added
    unprofiled_median_ns: float | None = None  # the step replayed without that overhead
    unprofiled_mean_ns: float | None = None
    measured_vs_replay: float | None = None  # (replay - measured) / measured, under profile
    calibration: dict | None = None  # the profiler-overhead calibration applied to the replay
    # traced / unprofiled step: the analysed steps' replay as recorded over the replay with the
    # calibration removed (medians); what `profiler_cost.out_of_range` compares with the range
    # the costs were fitted on
    correction_ratio: float | None = None
    # why the estimates were withheld for it: the correction left that range on the replayed
    # baseline (`advisor.analysis.analyze_input`); None: in range, or a measured baseline
    out_of_range: str | None = None


@dataclass(frozen=True)
class RuleResults:
    findings: list[Finding]
    skipped: list[Skipped]
    combined: Estimate | None  # all findings' fixes applied together
    steps_analysed: int
    below_threshold: list[Finding] = field(default_factory=list)
    basis: StepBasis | None = None  # which steps, how found, whether they carry an estimate
    baseline_step_ns: float | None = None  # the report's one step time (every estimate's)
    replay: ReplayCheck = field(default_factory=ReplayCheck)
    # rule name -> its category, for every rule that ran (and any finding added later, such as
    # `advisor profile`'s whole-run findings): the report reads rule metadata from here.
    categories: dict[str, str] = field(default_factory=dict)
    framework: FrameworkInfo | None = None  # whose knobs the fixes use, and why

    def skipped_by_reason(self) -> list[tuple[str, list[str]]]:
        return skipped_by_reason(self.skipped)


def unmet_requirement(rule: type[Rule], graph: OpGraph, ctx: RuleContext) -> str | None:
    for req in rule.requires:
        if req is Requirement.STEPS and not ctx.steps:
            return "no steady-state training steps found in the trace"
        if req is Requirement.GPU_WORK and not graph.has_gpu_work:
            return "the trace has no GPU work"
        if req is Requirement.LAUNCHES and not any(graph.launcher(o) for o in graph.gpu_ops[:5000]):
            return "the trace does not link GPU work to the host calls that launched it"
        if req is Requirement.PHASES and not any(s.phases for s in ctx.steps):
            return ("the steps have no named phases (data/forward/loss/backward/optimizer): "
                    "run under `advisor profile` or add NVTX/record_function ranges")
        if req is Requirement.COPIES and not any(o.kind is GpuOpKind.MEMCPY for o in graph.gpu_ops):
            return "the trace has no host-device copies"
        if req is Requirement.SPREAD and len(ctx.steps) < MIN_SPREAD_STEPS:
            return (f"{len(ctx.steps)} steady-state step{'s' * (len(ctx.steps) != 1)}: the "
                    f"spread between steps needs {MIN_SPREAD_STEPS} or more (record more steps: "
                    "`advisor profile --steps N`)")
        if req is Requirement.KNOWN_GPU:
            reason = unknown_gpu(graph)
            if reason:
                return reason
    return None


def unknown_gpu(graph: OpGraph) -> str | None:
    """Why a rule whose model is a ratio of the GPU's own rates cannot run: the trace names a
    device that is not in `advisor.engine.gpus` (a Pascal part, another vendor's), whose ratios
    an H100's would misstate (an MI250 already runs FP32 GEMMs on its matrix cores; a GP100 has
    no tensor cores). A trace that names no device is read as the H100 advisor is built for,
    and the rule says it assumed so."""
    from advisor.engine.gpus import trace_gpu

    named = [g.name for g in graph.info.gpus if g.name]
    if not named or trace_gpu(graph) is not None:
        return None
    return (f"the trace's GPU ({named[0][:60]!r}) is not one whose rates advisor knows "
            "(advisor/engine/gpus.py): another GPU's precision ratios would misstate it")


def run_rules(
    graph: OpGraph,
    rules: Sequence[type[Rule]],
    options: Mapping[str, Mapping[str, object]] | None = None,
    min_speedup: float = MIN_SPEEDUP,
    ctx: RuleContext | None = None,
    facts: HostFacts | None = None,
) -> RuleResults:
    """Every rule over the graph's analysed steps. ``ctx``: the context the caller already
    built (`advisor.analysis` shares one with the step summary), else one is built here;
    ``facts``: what `advisor profile` recorded about the host and the script (cores, the
    DataLoader, imported frameworks); None for a bare trace."""
    with gc_paused():  # the rules and their replays make many short-lived, acyclic objects
        return _run_rules(graph, rules, options, min_speedup, ctx, facts)


def _run_rules(
    graph: OpGraph,
    rules: Sequence[type[Rule]],
    options: Mapping[str, Mapping[str, object]] | None,
    min_speedup: float,
    ctx: RuleContext | None,
    facts: HostFacts | None,
) -> RuleResults:
    from advisor.engine import precedence

    ctx = ctx if ctx is not None else RuleContext(graph, analysed_steps(graph), options or {},
                                                  facts or HostFacts())
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    weak: list[Finding] = []
    for rule_cls in rules:
        reason = unmet_requirement(rule_cls, graph, ctx)
        if reason:
            skipped.append(Skipped(rule_cls.name, reason))
            continue
        for f in rule_cls().check(graph, ctx):
            (findings if f.estimate.speedup >= min_speedup else weak).append(f)
    findings.sort(key=lambda f: -f.estimate.speedup)
    findings, weak = precedence.apply(ctx, {r.name: r for r in rules}, findings, weak, min_speedup)
    # A finding whose own estimate is withheld (fp8-candidate without the shapes that decide
    # it) promises nothing, so the fixes together do not count it; where the steps withhold
    # every estimate, they all stay in and the combined one is withheld with them.
    priced = [f for f in findings if ctx.basis.withheld or not f.estimate.withheld]
    combined = combined_estimate(ctx, priced) if priced else None
    return RuleResults(findings, skipped, combined, len(ctx.steps), weak, ctx.basis,
                       ctx.baseline_step_ns if ctx.steps else None, replay_check(graph, ctx),
                       {r.name: r.category.value for r in rules}, ctx.framework)


def replay_check(graph: OpGraph, ctx: RuleContext) -> ReplayCheck:
    """The replay's own figures: how well it reproduces the trace, what it took out."""
    if not (ctx.steps and graph.has_gpu_work):
        return ReplayCheck()
    base = ctx.observed.mean_ns
    template = ctx.simulation_template
    return ReplayCheck(
        baseline_error=abs(base - ctx.step_ns) / ctx.step_ns if ctx.step_ns else None,
        profiler_overhead_ns=ctx.profiler_overhead_ns,
        unprofiled_median_ns=ctx.baseline.median_ns,
        unprofiled_mean_ns=ctx.baseline.mean_ns,
        calibration=template.calibration.to_dict() if template is not None else None,
        correction_ratio=(ctx.observed.median_ns / ctx.baseline.median_ns
                          if ctx.baseline.median_ns > 0 else None),
    )
