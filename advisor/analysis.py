"""The library entry point: a trace in, an `Analysis` out (used by the CLI, profile and gate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.config import RuleSettings, resolve
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.host import HostFacts
from advisor.engine.profiler_cost import Calibration
from advisor.engine.registry import load_rules
from advisor.engine.runner import RuleResults, run_rules
from advisor.gc_pause import gc_paused
from advisor.graph.model import OpGraph, StepSource
from advisor.graph.source_lines import attribute, attribute_findings
from advisor.graph.step_breakdown import Summary, summarize
from advisor.graph.trace_summary import TraceSummary, summarize_trace
from advisor.ingest.base import LoadOptions, load_trace


@dataclass
class Analysis:
    graph: OpGraph
    summary: Summary
    results: RuleResults
    trace_summary: TraceSummary | None = None  # the whole trace, when there are no steps
    # Under `advisor profile` only: the measured unprofiled step (advisor.capture.steptimes)
    # and the whole run's account (advisor.capture.accounting).
    measured: Any = None
    run: Any = None
    warnings: list[str] = field(default_factory=list)
    # The one rule context the summary and the rules shared: its replays are cached, so a
    # caller asking for the replayed periods again does not replay again.
    context: RuleContext | None = None
    # Host time, GPU idle and findings by the user's source lines, when the trace recorded
    # Python stacks (advisor.graph.source_lines); where to read the user's files from.
    source: Any = None
    source_roots: list[Path] = field(default_factory=list)
    settings: RuleSettings | None = None  # the rules and options it ran with (for a re-run)
    tried: Any = None  # `advisor profile --try`: the fixes measured on the job (report.tried)

    @property
    def steps_source(self) -> StepSource:
        return self.graph.step_source


def analyze_graph(
    graph: OpGraph,
    rule_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, object]] | None = None,
    settings: RuleSettings | None = None,
    facts: HostFacts | None = None,
    calibration: Calibration | None = None,
) -> Analysis:
    """Run the rules over a graph's steady-state steps. ``settings`` (pyproject.toml and the
    CLI: `advisor.config`) pick and configure the rules; ``rule_names``/``options`` are the
    same for library callers, applied on top. ``facts``: what `advisor profile` recorded about
    the host and the script (`advisor.engine.host`); ``calibration``: the profiler-overhead
    costs to remove instead of the calibrated ones (`advisor.capture.baseline` fits them to
    the measured step)."""
    with gc_paused():  # the whole analysis, not only the rules: one collection at the end
        return _analyze_graph(graph, rule_names, options, settings, facts, calibration)


def _analyze_graph(graph: OpGraph, rule_names: Sequence[str] | None,
                   options: Mapping[str, Mapping[str, object]] | None,
                   settings: RuleSettings | None, facts: HostFacts | None,
                   calibration: Calibration | None = None) -> Analysis:
    settings = (settings or RuleSettings()).override(select=list(rule_names or []), options=options)
    rules, rule_options = resolve(load_rules(), settings)
    # One pass: the analysed steps are found once, and the summary and the rules see the same.
    ctx = RuleContext(graph, analysed_steps(graph), rule_options, facts or HostFacts(),
                      calibration)
    summary = summarize(graph, ctx.steps)
    results = run_rules(graph, rules, rule_options, ctx=ctx)
    whole = summarize_trace(graph) if not ctx.steps else None
    source = attribute(graph, ctx.steps)
    if source is not None:
        attribute_findings(source, graph, results.findings)
    return Analysis(graph, summary, results, whole, context=ctx, source=source,
                    settings=settings)


def analyze(
    path: str | Path,
    rule_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, object]] | None = None,
    load_options: LoadOptions | None = None,
    settings: RuleSettings | None = None,
) -> Analysis:
    """Read a trace and run the rules over its steady-state steps."""
    with gc_paused():  # no collection between reading and analysing (`advisor.gc_pause`)
        analysis = analyze_graph(load_trace(path, load_options), rule_names, options, settings)
    analysis.source_roots = [Path.cwd(), Path(path).resolve().parent]
    return analysis


def analyze_shown(graph: OpGraph, settings: RuleSettings, progress: Any,
                  facts: HostFacts | None = None) -> Analysis:
    """`analyze_graph`, shown as one stage of a progress display (`advisor.report.progress`:
    anything with ``stage(text)``), as `advisor analyze` and `advisor profile` run it."""
    with progress.stage("running the rules (what-if replay of the steps)") as stage:
        analysis = analyze_graph(graph, settings=settings, facts=facts)
        r = analysis.results
        stage.done(f"rules: {len(r.findings) + len(r.below_threshold)} matches, "
                   f"{len(r.findings)} findings, {len(r.skipped)} not applicable, "
                   f"{r.steps_analysed} steps analysed")
    return analysis
