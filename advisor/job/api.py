"""The library entry point for a job: trace paths in, a `Job` with its findings out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from advisor.ingest.base import LoadOptions
from advisor.job.cluster import summarize_all
from advisor.job.inputs import assign_ranks, expand
from advisor.job.model import Job, build_job
from advisor.job.rule import run_job_rules


def analyze_job(
    paths: Sequence[str | Path],
    scheduler: str | None = None,
    workers: int | None = None,
    rule_names: Sequence[str] | None = None,
    rank_rules: bool = True,
    max_steps: int = LoadOptions.max_steps,
    progress: Callable[[int, int], None] | None = None,
) -> Job:
    files = expand(paths)
    summaries = summarize_all(files, scheduler=scheduler, workers=workers, rule_names=rule_names,
                              run_rules=rank_rules, max_steps=max_steps, progress=progress)
    job = build_job(assign_ranks(summaries))
    job.findings = run_job_rules(job)
    return job
