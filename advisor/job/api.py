"""The library entry point for a job: trace paths in, a `Job` with its findings out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from advisor.config import RuleSettings
from advisor.engine.job_model import Job, build_job, merge_rank_findings, rank_ranges
from advisor.engine.rank_summary import RankSummary
from advisor.errors import InputError
from advisor.ingest.base import LoadOptions
from advisor.ingest.folder import Skipped, skipped_note
from advisor.job.cluster import JobCluster
from advisor.job.inputs import assign_ranks, expand_inputs
from advisor.job.rule import JobRuleChoice, run_job_rule_set, split_settings

RULE_SAMPLE = 8
"""Ranks the per-rank rules run on by default: every rank of a job this small, else the
straggler, the rank with the least own work, and ranks spread evenly over the rest. A rule's
what-if replay costs several times a trace's parse, and on 1,000 data-parallel ranks it says the
same thing a thousand times; ``rank_rules="all"`` runs them everywhere."""


def rank_progress(quiet: bool) -> Callable[[int, int], None]:
    """``analyze_job``'s progress on stderr, on a terminal only (as for one trace: CI logs stay
    clean): the ranks summarised, every tenth of them."""
    from advisor.report.progress import Progress

    shown = Progress.on_stderr(quiet)

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            shown.note(f"ranks summarised: {done}/{total}")
    return progress


def pick_rule_ranks(job: Job, mode: str) -> list[RankSummary]:
    ranks = [r for r in job.ranks if r.steps]
    if mode == "none":
        return []
    if mode == "all" or len(ranks) <= RULE_SAMPLE:
        return ranks
    busy = job.median_by_rank("rank_busy_ns")
    chosen = []
    if job.straggler is not None:
        chosen.append(job.straggler.rank)
    chosen.append(min(busy, key=busy.get))
    step = len(ranks) / (RULE_SAMPLE - len(set(chosen)))
    i = 0.0
    while len(set(chosen)) < RULE_SAMPLE and int(i) < len(ranks):
        chosen.append(ranks[int(i)].rank)
        i += step
    keep = set(chosen)
    return [r for r in ranks if r.rank in keep]


def analyze_job(
    paths: Sequence[str | Path],
    scheduler: str | None = None,
    workers: int | None = None,
    rule_names: Sequence[str] | None = None,
    rank_rules: str = "sample",
    load_options: LoadOptions | None = None,
    settings: RuleSettings | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_steps: int | None = None,
    found: tuple[list[Path], list[Skipped]] | None = None,
) -> Job:
    """Summarise every rank on Dask, model the job, run the per-rank rules on the ranks picked
    by ``rank_rules`` ("sample", "all" or "none") and the job rules on the whole.

    ``load_options`` read every rank's trace as `advisor analyze` reads one (``--steps``,
    ``--max-steps``, ``--max-unpacked``); ``settings`` pick and configure the per-rank rules
    (``--select``, ``--ignore``, ``--rule-option``, [tool.advisor]); ``rule_names`` selects on
    top, for library callers; ``max_steps`` (as before ``load_options``) sets that one option.
    ``found``: ``expand_inputs(paths)`` when the caller has it already (`advisor analyze` checks
    its outputs against the inputs first): a folder's JSON files are sniffed once, not twice
    (half a second of a 1,024-rank job's serial start, issue #39)."""
    load_options = load_options or LoadOptions()
    if max_steps is not None:
        load_options = replace(load_options, max_steps=max_steps)
    if load_options.pid is not None:
        raise InputError("--pid picks one process of one trace; a job analyses every rank's "
                         "process (analyse that rank's trace alone to pick a process in it)")
    settings = (settings or RuleSettings()).override(select=list(rule_names or []))
    job_rules, rank_settings = split_settings(settings)
    if rank_settings is None:  # the selection names job rules only
        rank_rules = "none"
    files, skipped = found if found is not None else expand_inputs(paths)
    with JobCluster(scheduler, workers, tasks=len(files)) as cluster:
        summaries = assign_ranks(cluster.summaries(files, load_options, progress))
        job = build_job(summaries)
        picked = pick_rule_ranks(job, rank_rules)
        by_file: dict[str, list[RankSummary]] = {}
        for r in picked:
            by_file.setdefault(r.path, []).append(r)
        if by_file:
            results = cluster.findings(list(by_file), rank_settings, load_options)
            for path, found in zip(by_file, results):
                # one file holding several ranks: its rules analyse one process (the busiest)
                by_file[path][0].findings = found["findings"]
                analysed = next((r for r in by_file[path] if r.pid == found["pid"]),
                                by_file[path][0])
                analysed.report_step_ns = found["step_ns"]
    job.rank_findings = merge_rank_findings([r for rs in by_file.values() for r in rs[:1]])
    if rank_rules != "none":
        ran = sorted(r.rank for rs in by_file.values() for r in rs[:1])
        if len(ran) < len(job.ranks):
            job.notes.append(f"per-rank rules ran on {len(ran)} of {len(job.ranks)} ranks "
                             f"({rank_ranges(ran)}: the straggler, the least loaded, an even spread)")
    note = skipped_note(skipped)
    if note:
        job.notes.insert(0, note)
    return run_rules(job, job_rules)


def run_rules(job: Job, choice: JobRuleChoice | None = None) -> Job:
    """The job rules over ``job`` (all installed ones, or ``choice``): its findings (estimates
    withheld where a rank's steps cannot carry one), the matches under the threshold and the
    rules skipped for want of what they need."""
    results = run_job_rule_set(job, choice)
    job.findings = withhold(list(results.findings), job)
    job.below_threshold = list(results.below_threshold)
    job.skipped = list(results.skipped)
    return job


def withhold(findings: list, job: Job) -> list:
    """The job's estimates withheld where a rank's steps cannot carry one: the same criteria
    as `advisor analyze` applies to each trace alone (`RankSummary.withheld`), so a trace has
    the same eligibility alone and in its job (issue 32)."""
    reason = job.withheld
    if reason is None:
        return findings
    return [replace(f, estimate=replace(f.estimate, withheld=reason, low=min(1.0, f.estimate.low)))
            for f in findings]
