"""The library entry point: a trace in, an `Analysis` out (used by the CLI, profile and gate).

One pipeline: the inputs are fixed first (`AnalysisInput`: the graph, the rule settings, the
host facts, the profiler-overhead calibration and the baseline, replayed or measured), then
`analyze_input` runs the rules over them (`rule_pass`) and puts the estimates on the baseline.
It is a function of its inputs alone, and its `Analysis` is never written into afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from advisor.config import RuleSettings, resolve
from advisor.engine import profiler_cost
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.host import HostFacts
from advisor.engine.profiler_cost import Calibration
from advisor.engine.registry import load_rules
from advisor.engine.rule import Estimate, Finding
from advisor.engine.runner import RuleResults, run_rules
from advisor.gc_pause import gc_paused
from advisor.graph.blind_spots import blind_spots
from advisor.graph.model import OpGraph, StepSource
from advisor.graph.source_lines import SourceAttribution, attribute, attribute_findings
from advisor.graph.step_breakdown import Summary, summarize
from advisor.ingest.base import LoadOptions, load_trace

if TYPE_CHECKING:  # `advisor profile`'s and step-less traces' types: imported where used
    from advisor.engine.measured import MeasuredBaseline, MeasuredStep, RunAccount
    from advisor.graph.trace_summary import TraceSummary


class ShownStage(Protocol):
    def done(self, result: str) -> None: ...


class Shown(Protocol):
    """A progress display (`advisor.report.progress.Progress`, a layer above this one): what
    `rule_pass_shown` needs of it."""

    def stage(self, doing: str) -> AbstractContextManager[ShownStage]: ...


@dataclass(frozen=True)
class AnalysisInput:
    """Everything an analysis depends on, fixed before the rules run: `analyze_input` is a
    function of this alone. ``calibration``: the profiler-overhead costs the replays remove,
    chosen once here (`of` detects them from the trace; `advisor profile` may fit them to its
    measured step first: `advisor.capture.baseline`). ``measured``: the baseline every estimate
    is put on when `advisor profile` measured one; None: the replayed step is the baseline."""

    graph: OpGraph
    settings: RuleSettings
    facts: HostFacts
    calibration: Calibration
    measured: MeasuredBaseline | None = None
    source_roots: tuple[Path, ...] = ()  # where the user's source files are read from
    notes: tuple[str, ...] = ()  # warnings found while the inputs were fixed (a noisy host, a fit)

    @classmethod
    def of(cls, graph: OpGraph, settings: RuleSettings | None = None,
           facts: HostFacts | None = None, calibration: Calibration | None = None,
           **rest: Any) -> AnalysisInput:
        """The inputs of a bare trace: default settings and host, the calibrated costs of the
        trace's profiler, the replayed baseline (``rest``: the other fields)."""
        return cls(graph, settings or RuleSettings(), facts or HostFacts(),
                   calibration or profiler_cost.detect(graph), **rest)


@dataclass(frozen=True)
class RulePass:
    """What running the rules gives, before any baseline is applied: a function of the graph,
    settings, host facts and calibration only (kept here, to check it is given with the inputs
    it was run on), so `advisor profile`'s analysis beside the job reuses it while newer
    measured steps come (`advisor.capture.analysis_process`)."""

    graph: OpGraph
    settings: RuleSettings
    facts: HostFacts
    calibration: Calibration
    summary: Summary
    results: RuleResults
    # The one rule context the summary and the rules shared: its replays are cached, so a
    # caller asking for the replayed periods again does not replay again.
    context: RuleContext
    trace_summary: TraceSummary | None  # the whole trace, when there are no steps
    # Host time, GPU idle and findings by the user's source lines, when the trace recorded
    # Python stacks (advisor.graph.source_lines).
    source: SourceAttribution | None


@dataclass(frozen=True)
class Analysis:
    """One analysis, built once by `analyze_input` and never written into afterwards."""

    graph: OpGraph
    summary: Summary
    results: RuleResults
    trace_summary: TraceSummary | None = None  # the whole trace, when there are no steps
    # Under `advisor profile` only: the measured unprofiled step and the whole run's account
    # (`advisor.engine.measured`).
    measured: MeasuredStep | None = None
    run: RunAccount | None = None
    warnings: tuple[str, ...] = ()
    context: RuleContext | None = None  # the rules' shared context (`RulePass.context`)
    source: SourceAttribution | None = None  # by the user's source lines (`RulePass.source`)
    source_roots: tuple[Path, ...] = ()  # where to read the user's files from
    settings: RuleSettings | None = None  # the rules and options it ran with (for a re-run)

    @property
    def steps_source(self) -> StepSource:
        return self.graph.step_source


def rule_pass(inputs: AnalysisInput) -> RulePass:
    """Run the rules over the graph's steady-state steps, with the inputs' calibration."""
    graph = inputs.graph
    with gc_paused():  # the whole pass, not only the rules: one collection at the end
        rules, rule_options = resolve(load_rules(), inputs.settings)
        # One pass: the analysed steps are found once, and the summary and the rules see the same.
        ctx = RuleContext(graph, analysed_steps(graph), rule_options, inputs.facts,
                          inputs.calibration)
        summary = summarize(graph, ctx.steps)
        results = run_rules(graph, rules, rule_options, ctx=ctx)
        whole = _summarize_trace(graph) if not ctx.steps else None
        source = attribute(graph, ctx.steps)
        if source is not None:
            attribute_findings(source, graph, results.findings)
    return RulePass(graph, inputs.settings, inputs.facts, inputs.calibration, summary, results,
                    ctx, whole, source)


def _summarize_trace(graph: OpGraph) -> TraceSummary:
    """The whole trace's summary, for a trace without steps; imported only then (start-up of
    `advisor analyze` on the usual trace, issue #39)."""
    from advisor.graph.trace_summary import summarize_trace

    return summarize_trace(graph)


def analyze_input(inputs: AnalysisInput, ruled: RulePass | None = None) -> Analysis:
    """The analysis of fixed inputs: the rules' pass (``ruled``, when the caller already ran it
    on these inputs; only the baseline may differ), its estimates put on the inputs' baseline."""
    if ruled is None:
        ruled = rule_pass(inputs)
    elif not (ruled.graph is inputs.graph and ruled.settings == inputs.settings
              and ruled.facts == inputs.facts and ruled.calibration == inputs.calibration):
        raise ValueError("the rule pass was run on other inputs (graph, settings, host facts "
                         "or calibration) than these")
    results, run, warnings = ruled.results, None, inputs.notes
    warnings += blind_spots(inputs.graph, ruled.context.steps)
    measured = inputs.measured
    if measured is None or not measured.usable:  # the replayed step is the baseline
        results, note = _correction_in_range(results, ruled.context)
        if note is not None:
            warnings += (note,)
    if measured is not None:
        from advisor.engine.measured import on_measured  # `advisor profile`'s: start-up

        results, run, more = on_measured(results, measured, inputs.graph.info.format)
        warnings += more
    return Analysis(inputs.graph, ruled.summary, results, ruled.trace_summary,
                    measured.step if measured is not None else None, run, warnings,
                    ruled.context, ruled.source, inputs.source_roots, inputs.settings)


def _correction_in_range(results: RuleResults, ctx: RuleContext,
                         ) -> tuple[RuleResults, str | None]:
    """``results`` with their estimates withheld, and the warning that says why, where the
    profiler-overhead correction takes the replayed baseline further down than the captures its
    costs were fitted on (`profiler_cost.out_of_range`); as they were, and None, otherwise.

    Only on the replayed baseline: under `advisor profile` a usable measured step is the
    baseline, and the costs were checked (or fitted) against it (`advisor.capture.baseline`)."""
    template = ctx.simulation_template
    if template is None or not ctx.graph.has_gpu_work:
        return results, None
    reason = profiler_cost.out_of_range(template.calibration, ctx.observed.median_ns,
                                        ctx.baseline.median_ns)
    if reason is None:
        return results, None
    results = replace(results, findings=_withheld(results.findings, reason),
                      below_threshold=_withheld(results.below_threshold, reason),
                      combined=_withhold(results.combined, reason),
                      replay=replace(results.replay, out_of_range=reason))
    return results, (reason + "; speedup estimates are withheld (the findings stand). "
                     "`advisor profile` measures the unprofiled step instead, or capture without "
                     "Python stacks (with_stack=False, `advisor profile --no-stacks`), which costs "
                     "the host about 2 us per CUDA call")


def _withhold(e: Estimate | None, reason: str) -> Estimate | None:
    """``e`` withheld for ``reason``, as the step basis withholds an estimate
    (`RuleContext.estimate`: the range widened down to no gain, and labelled); one already
    withheld keeps its own reason."""
    if e is None or e.withheld:
        return e
    return replace(e, withheld=reason, low=min(1.0, e.low))  # down to no gain, never above it


def _withheld(findings: Sequence[Finding], reason: str) -> list[Finding]:
    return [replace(f, estimate=_withhold(f.estimate, reason), alone=_withhold(f.alone, reason))
            for f in findings]


def analyze_graph(
    graph: OpGraph,
    rule_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, object]] | None = None,
    settings: RuleSettings | None = None,
    facts: HostFacts | None = None,
) -> Analysis:
    """Run the rules over a graph's steady-state steps. ``settings`` (pyproject.toml and the
    CLI: `advisor.config`) pick and configure the rules; ``rule_names``/``options`` are the
    same for library callers, applied on top. ``facts``: what `advisor profile` recorded about
    the host and the script (`advisor.engine.host`)."""
    settings = (settings or RuleSettings()).override(select=list(rule_names or []), options=options)
    return analyze_input(AnalysisInput.of(graph, settings, facts))


def analyze(
    path: str | Path,
    rule_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, object]] | None = None,
    load_options: LoadOptions | None = None,
    settings: RuleSettings | None = None,
) -> Analysis:
    """Read a trace and run the rules over its steady-state steps."""
    settings = (settings or RuleSettings()).override(select=list(rule_names or []), options=options)
    with gc_paused():  # no collection between reading and analysing (`advisor.gc_pause`)
        graph = load_trace(path, load_options)
        return analyze_input(AnalysisInput.of(
            graph, settings, source_roots=(Path.cwd(), Path(path).resolve().parent)))


def rule_pass_shown(inputs: AnalysisInput, progress: Shown) -> RulePass:
    """`rule_pass`, shown as one stage of a progress display (`advisor.report.progress`:
    anything with ``stage(text)``), as `advisor analyze` and `advisor profile` run it."""
    with progress.stage("running the rules (what-if replay of the steps)") as stage:
        ruled = rule_pass(inputs)
        r = ruled.results
        stage.done(f"rules: {len(r.findings) + len(r.below_threshold)} matches, "
                   f"{len(r.findings)} findings, {len(r.skipped)} not applicable, "
                   f"{r.steps_analysed} steps analysed")
    return ruled


def analyze_shown(inputs: AnalysisInput, progress: Shown) -> Analysis:
    """`analyze_input`, its rule pass shown by ``progress`` (`rule_pass_shown`)."""
    return analyze_input(inputs, rule_pass_shown(inputs, progress))
