"""The library entry point: a trace in, an `Analysis` out (used by the CLI, profile and gate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.config import RuleSettings, resolve
from advisor.engine.host import HostFacts
from advisor.engine.registry import load_rules
from advisor.engine.runner import RuleResults, run_rules
from advisor.graph.model import OpGraph
from advisor.graph.timeline import Summary, summarize
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

    @property
    def steps_source(self) -> str:
        if not self.graph.steps:
            return "none"
        if self.graph.steps[0].name.endswith("(launch pattern)"):
            return "launch pattern"
        return "ranges"


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
    from advisor.engine.context import analysed_steps

    settings = (settings or RuleSettings()).override(select=list(rule_names or []), options=options)
    rules, rule_options = resolve(load_rules(), settings)
    steps = analysed_steps(graph)
    summary = summarize(graph, steps)
    results = run_rules(graph, rules, rule_options, facts=facts)
    whole = summarize_trace(graph) if not steps else None
    return Analysis(graph, summary, results, whole)


def analyze(
    path: str | Path,
    rule_names: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, object]] | None = None,
    load_options: LoadOptions | None = None,
    settings: RuleSettings | None = None,
) -> Analysis:
    """Read a trace and run the rules over its steady-state steps."""
    return analyze_graph(load_trace(path, load_options), rule_names, options, settings)
