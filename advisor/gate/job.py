"""`advisor gate` for distributed jobs: compare two runs by the job's step, name the rank and
the collective that regressed.

The job's step (the slowest rank's, per aligned step) is the sample; the test is the gate's own
one-sided Mann-Whitney U with the Hodges-Lehmann shift as the effect (`advisor.gate.stats`). A
regression is then attributed: the rank whose own work grew most, and the collective whose exposed
plus waiting time per step grew most.

It fails closed as the single gate does (docs/gate.md): the threshold must be a finite fraction;
both jobs need steps, none of them 0 ms long (a zero baseline made every change +0.0%); the
same ranks, each on the same GPU model, captured by the same profiler and running the same
workload by the single gate's evidence (`advisor.gate.workload`, on each rank's
`advisor.graph.rank_workload.RankWorkload`). Anything it cannot establish is "inconclusive" (exit 2).

Like the single gate, which reads `GateInput`s and never a graph, it reads `JobGateInput`s: what
it compares of each job, built from the cross-rank model by `gate_input` below.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from advisor.engine.job_model import Job
from advisor.engine.rank_summary import RankSummary
from advisor.errors import AnalysisError
from advisor.gate.compare import MAX_THRESHOLD, check_fraction
from advisor.gate.inputs import GateInput, KernelRow
from advisor.gate.render.github import command
from advisor.gate.render.text import wrap
from advisor.gate.stats import hodges_lehmann, mann_whitney
from advisor.gate.workload import check_same_workload
from advisor.safe_text import no_ci_commands, plain

ALPHA = 0.05
"""Significance of the one-sided test, as in the single-rank gate."""


@dataclass
class JobGateResult:
    status: str  # "pass", "fail", "inconclusive"
    base_step_ns: float
    cand_step_ns: float
    change: float  # relative, from the Hodges-Lehmann shift
    p_value: float
    rank: int | None  # the rank whose own work grew most
    rank_change_ns: float
    collective: str | None  # the collective whose exposed + waiting time grew most
    collective_change_ns: float
    reason: str = ""
    notes: list[str] = field(default_factory=list)  # what was checked (the workload, per rank)
    compared: bool = True  # False: refused before any comparison (`reason` says why)

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1}.get(self.status, 2)


@dataclass(frozen=True)
class JobGateInput:
    """What the job gate compares of one job."""

    steps_ns: tuple[int, ...]  # the job's step (the slowest rank's), per aligned step
    ranks: tuple[int, ...]
    rank_busy_ns: dict[int, float]  # each rank's own work per step, median
    collective_cost_ns: dict[str, float]  # per kind: exposed + waiting time per step
    rank_inputs: dict[int, GateInput]  # each rank as the single gate's input

    @property
    def step_ns(self) -> float:
        return statistics.median(self.steps_ns) if self.steps_ns else 0.0


def gate_input(job: Job) -> JobGateInput:
    """What the job gate compares of ``job``: its steps, each rank's own work and workload
    evidence (`advisor.graph.rank_workload`), and each collective's exposed plus waiting time."""

    def rank_input(r: RankSummary) -> GateInput:
        w = r.workload
        return GateInput(
            path=f"{r.path} (rank {r.rank})", kind="trace", trace_format=r.trace_format,
            gpus=(r.gpu,) if r.gpu else (), steps_source=r.step_source,
            step_times_ms=tuple(s.time_ns / 1e6 for s in r.steps),
            kernels=tuple(KernelRow(name, category, count, 0.0, dict(shapes))
                          for name, category, count, shapes in w.kernels))

    return JobGateInput(
        steps_ns=tuple(s.time_ns for s in job.steps), ranks=tuple(job.rank_ids),
        rank_busy_ns=job.median_by_rank("rank_busy_ns"),
        collective_cost_ns={c.kind: c.exposed_ns + c.waiting_ns for c in job.collectives},
        rank_inputs={r.rank: rank_input(r) for r in job.ranks})


def _not_comparable(base: JobGateInput, cand: JobGateInput) -> tuple[str, list[str]]:
    """Why the two jobs cannot be compared ("" when they can), and what was checked."""
    for job, role in ((base, "baseline"), (cand, "candidate")):
        if not job.steps_ns:
            return f"the {role} job has no steps aligned across its ranks", []
        zero = sum(1 for t in job.steps_ns if t <= 0)
        if zero:
            return (f"{zero} of the {role} job's {len(job.steps_ns)} steps last 0 ms: a step "
                    "time of nothing cannot be compared (check the step ranges of its traces)"), []
    if len(base.ranks) != len(cand.ranks):
        return (f"the runs have {len(base.ranks)} and {len(cand.ranks)} ranks: not the same "
                "job shape"), []
    if sorted(base.ranks) != sorted(cand.ranks):
        return "the runs have different ranks: not the same job shape", []
    notes: list[str] = []
    for rank in sorted(base.ranks):
        b, c = base.rank_inputs[rank], cand.rank_inputs[rank]
        if b.trace_format and c.trace_format and b.trace_format != c.trace_format:
            return (f"rank {rank}: captures of different profilers ({b.trace_format} and "
                    f"{c.trace_format}); capture both jobs the same way"), []
        if b.gpus and c.gpus and b.gpus != c.gpus:
            return f"rank {rank}: different GPUs ({b.gpus[0]} and {c.gpus[0]})", []
        try:
            checked = check_same_workload(b, c)
        except AnalysisError as e:
            return f"rank {rank}: {e}", []
        notes.extend(f"rank {rank}: {n}" for n in checked)
    return "", notes


def compare_jobs(base: JobGateInput, cand: JobGateInput, threshold: float) -> JobGateResult:
    """The verdict on two jobs; ``threshold`` a fraction (0.05 is 5%)."""
    check_fraction("threshold", threshold, upper=MAX_THRESHOLD)
    why, notes = _not_comparable(base, cand)
    if why:
        return JobGateResult(
            status="inconclusive", base_step_ns=base.step_ns, cand_step_ns=cand.step_ns,
            change=0.0, p_value=1.0, rank=None, rank_change_ns=0.0, collective=None,
            collective_change_ns=0.0, reason=why, compared=False)
    b = [float(t) for t in base.steps_ns]
    c = [float(t) for t in cand.steps_ns]
    mw = mann_whitney(b, c)
    shift = hodges_lehmann(b, c)
    base_med = statistics.median(b)
    change = shift / base_med
    bb, cb = base.rank_busy_ns, cand.rank_busy_ns
    common = sorted(set(bb) & set(cb))
    rank = max(common, key=lambda r: cb[r] - bb[r]) if common else None
    bc, cc = base.collective_cost_ns, cand.collective_cost_ns
    kinds = set(bc) | set(cc)
    coll = max(kinds, key=lambda k: cc.get(k, 0.0) - bc.get(k, 0.0)) if kinds else None
    result = JobGateResult(
        status="pass", base_step_ns=base_med, cand_step_ns=statistics.median(c), change=change,
        p_value=mw.p_greater, rank=rank, rank_change_ns=(cb[rank] - bb[rank]) if rank is not None else 0.0,
        collective=coll, collective_change_ns=(cc.get(coll, 0.0) - bc.get(coll, 0.0)) if coll else 0.0,
        notes=notes)
    if change > threshold and mw.p_greater < ALPHA:
        result.status = "fail"
    elif change > threshold:
        result.status, result.reason = "inconclusive", (
            f"the job's step grew {change:.1%} but {len(b)} vs {len(c)} steps cannot tell it from "
            f"noise (p = {mw.p_greater:.2f}); record more steps")
    return result


def render(result: JobGateResult) -> str:
    head = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}[result.status]
    if not result.compared:  # no step-time change to report
        return _safe([f"{head}: the jobs could not be compared (failing closed)",
                      f"  {result.reason}"])
    lines = [f"{head}: job step {result.base_step_ns / 1e6:.3f} ms -> {result.cand_step_ns / 1e6:.3f} ms "
             f"({result.change:+.1%}, one-sided p = {result.p_value:.3f})"]
    if result.rank is not None:
        lines.append(f"  rank {result.rank}: own work {result.rank_change_ns / 1e6:+.3f} ms per step "
                     f"(the rank that grew most)")
    if result.collective:
        lines.append(f"  {result.collective}: exposed + waiting {result.collective_change_ns / 1e6:+.3f} ms "
                     f"per step (the collective that grew most)")
    if result.reason:
        lines.append(f"  {result.reason}")
    lines.extend(f"  - {n}" for n in result.notes)
    return _safe(lines)


def _safe(lines: list[str]) -> str:
    """The verdict's lines carry trace and file names (the collective's name, the reason): the
    output policy, line by line, wrapped at 80 columns like the single gate's text."""
    return no_ci_commands("\n".join(w for x in lines for w in wrap(plain(x, 4000))) + "\n")


def render_annotations(result: JobGateResult) -> str:
    """GitHub Actions workflow commands for the job verdict (``--github-annotations``)."""
    summary = (f"job step {result.base_step_ns / 1e6:.3f} -> {result.cand_step_ns / 1e6:.3f} ms "
               f"({result.change:+.1%})")
    if result.status == "fail":
        where = f"; rank {result.rank} grew most" if result.rank is not None else ""
        line = command("error", "advisor gate: step-time regression", summary + where)
    elif result.status == "inconclusive":
        line = command("error", "advisor gate: inconclusive", result.reason)
    else:
        line = command("notice", "advisor gate: pass", summary)
    return line + "\n"
