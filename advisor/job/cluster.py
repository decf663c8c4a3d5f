"""Run the per-rank work on Dask: one task per trace file, only summaries travel back.

Each task loads one trace, runs the per-rank rules on it and returns its `RankSummary` list (a few
kilobytes); the op graphs stay on the workers. Without ``--scheduler`` a `LocalCluster` of worker
processes on this machine runs the tasks (one single-threaded worker per core: trace parsing is
pure Python and holds the GIL, so threads would not help); with it, an existing cluster's workers
do, reading the traces where they live (the paths must be valid on the workers: a shared file
system, or the scheduler started beside the traces).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from advisor.errors import AdvisorError, InputError
from advisor.ingest.base import LoadOptions
from advisor.job.summary import RankSummary


def summarize_file(path: str, order: int, rule_names: Sequence[str] | None, run_rules: bool,
                   max_steps: int) -> list[RankSummary]:
    """The Dask task: one trace file in, its ranks' summaries out."""
    from advisor.ingest.base import load_trace
    from advisor.job.summary import finding_record, summarize_graph

    graph = load_trace(path, LoadOptions(max_steps=max_steps))
    findings: list[dict] = []
    if run_rules:
        from advisor.analysis import analyze_graph

        analysis = analyze_graph(graph, rule_names)
        findings = [finding_record(f) for f in analysis.results.findings]
    return summarize_graph(graph, order, findings)


def summarize_all(
    paths: Sequence[Path],
    scheduler: str | None = None,
    workers: int | None = None,
    rule_names: Sequence[str] | None = None,
    run_rules: bool = True,
    max_steps: int = LoadOptions.max_steps,
    progress: Callable[[int, int], None] | None = None,
) -> list[RankSummary]:
    """Summaries of every rank in ``paths``, computed on a Dask cluster."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as e:  # a dependency of advisor: only a broken install lacks it
        raise AdvisorError("multi-rank analysis needs dask[distributed] (pip install advisor "
                           "installs it)") from e
    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout="15s")
        except OSError as e:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from e
    else:
        n = workers or min(len(paths), os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=max(1, n), threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
    try:
        futures = client.map(summarize_file, [str(p) for p in paths], range(len(paths)),
                             rule_names=list(rule_names or []) or None, run_rules=run_rules,
                             max_steps=max_steps, pure=False)
        results: list[RankSummary] = []
        for done, future in enumerate(as_completed(futures), start=1):
            results.extend(future.result())  # an AdvisorError raised on a worker re-raises here
            if progress:
                progress(done, len(paths))
            future.release()
        return results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
