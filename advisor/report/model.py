"""The report: one frozen, typed record of an analysis, built once, that every view renders.

An `Analysis` (`advisor.analysis`) is the working state of the pipeline: the graph, the step
summary, the rules' results. A report is what is said about it, fixed before anything is
written: each finding with its rule's metadata (its category), the step figures, the gate's
per-step metrics, the replay's checks, and one baseline step time. The JSON result
(`advisor.report.json_report`) serialises it; the console, the HTML page and `advisor gate` (which
reads the JSON) render it. None of them reads the graph or the analysis, so no two of them can
show the step as two different numbers.

`build_report` does the computing (the step metrics, on first read: only the JSON result carries
them; and for the HTML page the timeline of the representative step, which only that page draws:
``timeline=True``). `as_report` lets library
callers hand a renderer an `Analysis` directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from advisor.analysis import Analysis
from advisor.engine.efficiency import StepEfficiency, step_efficiency
from advisor.engine.framework import FrameworkInfo
from advisor.engine.rule import Estimate, Finding, Skipped, skipped_by_reason
from advisor.engine.runner import ReplayCheck
from advisor.engine.step_basis import StepBasis
from advisor.graph.launch_stats import LaunchStats, launch_stats
from advisor.graph.model import OpGraph, StepSource, TraceInfo
from advisor.graph.step_breakdown import KernelStat, StepBreakdown
from advisor.report.source_view import SourceSection

if TYPE_CHECKING:  # types of fields only: their modules are start-up `advisor analyze` seldom uses
    from advisor.engine.measured import MeasuredStep, RunAccount
    from advisor.graph.step_metrics import StepMetrics
    from advisor.graph.trace_summary import TraceSummary
    from advisor.report.job_section import JobSection
    from advisor.report.tried import Tried


@dataclass(frozen=True)
class ReportFinding:
    """A finding with its rule's metadata."""

    finding: Finding
    category: str  # the rule's `advisor.engine.rule.Category` value ("" when unknown)
    timeline_ids: tuple[str, ...] = ()  # HTML only: the drawn events it points at


@dataclass(frozen=True)
class StepMark:
    """One step found (warm-up included), as the step chart draws it."""

    index: int
    warmup: bool
    time_ns: int


@dataclass(frozen=True)
class StepFigures:
    """The analysed steady steps: times (ns), where their time went, and the gate's metrics."""

    count: int  # steps found in the whole trace (the ingest's total, or those loaded)
    source: StepSource
    basis: StepBasis | None  # which process and steps, how found, whether they carry estimates
    warmup: int
    marks: tuple[StepMark, ...]  # every step found, in order
    analysed_times_ns: tuple[int, ...]  # the analysed steps (the summary's rows)
    median_ns: float | None  # None: no step analysed
    mean_ns: float | None
    busy_median_ns: float | None
    phases_ns: Mapping[str, float] = field(default_factory=dict)  # phase -> median
    idle_causes_ns: Mapping[str, float] = field(default_factory=dict)  # cause -> mean per step
    measured: MeasuredStep | None = None  # `advisor profile`: the unprofiled steps
    # What computes `metrics` (None: no steps). Only the JSON result (and so the gate) reads
    # the metrics, and on a large window they take 0.1-0.17 s: a console-only run (issue #17)
    # should not pay for them, so they are computed on first read, once.
    metrics_of: Callable[[], StepMetrics] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def metrics(self) -> StepMetrics:
        """The gate's per-step metrics (`advisor.graph.step_metrics`)."""
        if self.metrics_of is not None:
            return self.metrics_of()
        from advisor.graph.step_metrics import StepMetrics  # the gate's: start-up of the rest

        return StepMetrics((), ())

    @property
    def analysed(self) -> int:
        return len(self.analysed_times_ns)


@dataclass(frozen=True)
class Timeline:
    """The HTML page's drawing of the representative step (`advisor.report.timeline_view`)."""

    data: Mapping[str, Any] | None
    step_position: int | None  # that step's position among `StepFigures.marks`


@dataclass(frozen=True)
class Report:
    trace: TraceInfo
    has_gpu_work: bool
    steps: StepFigures
    kernel_category_ns: Mapping[str, int]  # per analysed step
    top_kernels: tuple[KernelStat, ...]
    whole_trace: TraceSummary | None  # without steps: where the whole trace's GPU time went
    findings: tuple[ReportFinding, ...]
    below_threshold: tuple[Finding, ...]
    skipped: tuple[Skipped, ...]
    combined: Estimate | None  # all findings' fixes together
    baseline_step_ns: float | None  # the report's one step time: every estimate's step
    replay: ReplayCheck
    run: RunAccount | None = None  # `advisor profile`: where the whole run's time went
    warnings: tuple[str, ...] = ()
    timeline: Timeline | None = None  # built for the HTML page only
    source: SourceSection | None = None  # the user's source lines (`report.source_view`)
    framework: FrameworkInfo | None = None  # whose knobs the fixes use, and why
    tried: Tried | None = None  # `advisor profile --try`: fixes measured on the job
    # How well the steps use the GPU (MFU, tensor cores, kernels against their roof) and their
    # launch statistics (advisor.engine.efficiency, advisor.graph.launch_stats); None: no steps.
    efficiency: StepEfficiency | None = None
    launches: LaunchStats | None = None
    # A distributed job's report (`advisor.report.job_report.build_job_report`): its findings above
    # are the job rules', its step the job's, and this section holds the ranks, collectives,
    # straggler and the rank rules' findings. None for one trace.
    job: JobSection | None = None

    def skipped_by_reason(self) -> list[tuple[str, list[str]]]:
        return skipped_by_reason(self.skipped)


def _steps(analysis: Analysis) -> StepFigures:
    g, s = analysis.graph, analysis.summary
    has = bool(s.steps)
    return StepFigures(
        count=max(int(g.info.totals.get("steps", 0)), len(g.steps)),
        source=analysis.steps_source,
        basis=analysis.results.basis,
        warmup=s.warmup_steps,
        marks=tuple(StepMark(x.index, x.warmup, x.time_ns) for x in g.steps),
        analysed_times_ns=tuple(b.time_ns for b in s.steps),
        median_ns=s.median_step_ns if has else None,
        mean_ns=s.mean_step_ns if has else None,
        busy_median_ns=s.median_busy_ns if has else None,
        phases_ns=s.phase_medians_ns(),
        idle_causes_ns=s.idle_cause_medians_ns(),
        measured=analysis.measured,
        metrics_of=partial(_step_metrics, g, s.steps),
    )


def _step_metrics(graph: OpGraph, steps: Sequence[StepBreakdown]) -> StepMetrics:
    """`advisor.graph.step_metrics.step_metrics`, imported when the gate asks for them (never
    by `advisor analyze`: its import is start-up, issue #39)."""
    from advisor.graph.step_metrics import step_metrics

    return step_metrics(graph, steps)


def build_report(analysis: Analysis, timeline: bool = False, tried: Tried | None = None) -> Report:
    """The report of an analysis; ``timeline``: also draw the representative step (HTML);
    ``tried``: `advisor profile --try`'s measurements of the fixes, taken after the analysis."""
    r = analysis.results
    drawn = _timeline(analysis) if timeline else None
    findings = tuple(
        ReportFinding(f, r.categories.get(f.rule, ""),
                      _cited(drawn, analysis, f) if drawn is not None else ())
        for f in r.findings)
    return Report(
        trace=analysis.graph.info,
        has_gpu_work=analysis.graph.has_gpu_work,
        steps=_steps(analysis),
        kernel_category_ns=dict(analysis.summary.category_ns),
        top_kernels=tuple(analysis.summary.top_kernels),
        whole_trace=analysis.trace_summary,
        findings=findings,
        below_threshold=tuple(r.below_threshold),
        skipped=tuple(r.skipped),
        combined=r.combined,
        baseline_step_ns=r.baseline_step_ns,
        replay=r.replay,
        run=analysis.run,
        warnings=tuple(analysis.warnings),
        timeline=drawn,
        source=SourceSection.of(analysis),
        framework=r.framework,
        tried=tried,
        efficiency=_efficiency(analysis),
        launches=launch_stats(analysis.graph, [b.step for b in analysis.summary.steps]),
    )


def _efficiency(analysis: Analysis) -> StepEfficiency | None:
    steps = [b.step for b in analysis.summary.steps]
    if not steps:
        return None
    return step_efficiency(analysis.graph, steps, analysis.results.baseline_step_ns)


def _timeline(analysis: Analysis) -> Timeline:
    from advisor.report.timeline_view import build_timeline, representative_step

    rep = representative_step(analysis.summary)
    position = next((i for i, s in enumerate(analysis.graph.steps) if rep and s is rep.step), None)
    return Timeline(build_timeline(analysis), position)


def _cited(drawn: Timeline, analysis: Analysis, f: Finding) -> tuple[str, ...]:
    from advisor.report.timeline_view import cited_events

    ev = f.evidence
    evidence = {"node_ids": list(ev.node_ids), "kernels": list(ev.kernels),
                "api_calls": list(ev.api_calls), "ranges": list(ev.ranges)}
    return tuple(cited_events(drawn.data, analysis.graph, evidence))


def as_report(source: Report | Analysis, timeline: bool = False) -> Report:
    """A renderer's input: a report as is, an analysis built into one (library callers)."""
    if isinstance(source, Report):
        if timeline and source.timeline is None:
            raise ValueError("this report was built without the timeline the HTML page draws: "
                             "build_report(analysis, timeline=True)")
        return source
    return build_report(source, timeline=timeline)
