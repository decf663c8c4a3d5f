"""Run the rules over a graph: check requirements, collect findings, estimate them together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.effects import Effect
from advisor.engine.rule import Estimate, Finding, Requirement, Rule, Skipped
from advisor.graph.model import GpuOpKind, OpGraph

MIN_SPEEDUP = 1.02
"""A fix that saves under 2% of the step is within run-to-run noise of a training step: such a
match is not reported as a finding (a healthy step must come out clean)."""


@dataclass
class RuleResults:
    findings: list[Finding]
    skipped: list[Skipped]
    combined: Estimate | None  # all findings' fixes applied together
    steps_analysed: int
    baseline_error: float | None = None  # |replay - observed| / observed of the unmodified model
    below_threshold: list[Finding] = field(default_factory=list)
    profiler_overhead_ns: float | None = None  # host time per step the profiler itself added
    unprofiled_median_ns: float | None = None  # the step replayed without that overhead
    unprofiled_mean_ns: float | None = None


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
    return None


def run_rules(
    graph: OpGraph,
    rules: Sequence[type[Rule]],
    options: Mapping[str, Mapping[str, object]] | None = None,
    min_speedup: float = MIN_SPEEDUP,
) -> RuleResults:
    ctx = RuleContext(graph, analysed_steps(graph), options or {})
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
    combined = None
    baseline_error = None
    profiler_overhead = None
    if ctx.steps and graph.has_gpu_work:
        base = ctx.observed.mean_ns
        baseline_error = abs(base - ctx.step_ns) / ctx.step_ns if ctx.step_ns else None
        profiler_overhead = ctx.profiler_overhead_ns
    if findings:
        # A change two findings both make (the FP8 finding's compiled route repeats the
        # compiler-fusion finding's fusion) happens once: identical effects are replayed once.
        effects: list[Effect] = list(dict.fromkeys(e for f in findings for e in f.effects))
        basis = "mean" if any(f.estimate.basis == "mean" for f in findings) else "median"
        step_ns, after = ctx.before_after(effects, basis)
        speedup = step_ns / after if after > 0 else 1.0
        lows = [f.estimate.low / f.estimate.speedup for f in findings]
        highs = [f.estimate.high / f.estimate.speedup for f in findings]
        combined = Estimate(
            step_ns=step_ns,
            predicted_step_ns=after,
            speedup=speedup,
            low=max(1.0, speedup * min(lows)),
            high=speedup * max(highs),
            model="all findings' effects applied together in one replay of the analysed steps",
            assumptions=("fixes do not interact beyond what the replay models",),
            basis=basis,
        )
    unprofiled = (ctx.baseline.median_ns, ctx.baseline.mean_ns) if profiler_overhead is not None \
        else (None, None)
    return RuleResults(findings, skipped, combined, len(ctx.steps), baseline_error, weak,
                       profiler_overhead, *unprofiled)
