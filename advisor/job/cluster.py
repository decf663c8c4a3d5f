"""Run the per-rank work on Dask: one task per trace file, only small results travel back.

Each task loads one trace and returns its `RankSummary` list (a few kilobytes); the op graphs stay
on the workers. Without ``--scheduler`` a `LocalCluster` of worker processes on this machine runs
the tasks (one single-threaded worker per core: trace parsing is pure Python and holds the GIL,
so threads would not help); with it, an existing cluster's workers do, reading the traces where
they live (the paths must be valid on the workers: a shared file system, or the scheduler started
beside the traces).

The work comes in two passes over one cluster: every rank's summary, then the per-rank rules on
the ranks the job model picks (`advisor.job.api`), since a rule's what-if replay costs several
times a trace's parse.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.config import RuleSettings
from advisor.engine.rank_summary import RankSummary
from advisor.errors import AdvisorError, InputError
from advisor.ingest.base import LoadOptions


def summarize_file(path: str, order: int, options: LoadOptions) -> list[RankSummary]:
    """Dask task: one trace file in, its ranks' summaries out. A torch.profiler trace is read
    once and cut to the events a summary uses, an nsys export with only those events selected
    by its loader (`advisor.ingest.slim_trace.summary_graph`); anything else whole.

    The collector is paused for the whole file, not only inside the loaders: the slim scan's
    decodes and the summary make tens of thousands of acyclic objects, and with the collector
    on a torch.profiler rank paid for 52 young-generation collections (4 a rank of a job
    of the nsys seed); what a cycle might hold waits for the task's full collection."""
    from advisor.engine.rank_summary import summarize_graph
    from advisor.gc_pause import gc_paused
    from advisor.ingest.slim_trace import summary_graph

    with gc_paused():
        graph = summary_graph(path, options)
        graph.info.path = str(path)
        return summarize_graph(graph, order)


@dataclass(frozen=True)
class TaskError:
    """An advisor error met inside a task (a trace that cannot be read), returned rather than
    raised: Dask logs a raised exception with its traceback on the worker ("Compute Failed"),
    which is not the one line the user is owed. `JobCluster.map` raises it again as it was."""

    error: AdvisorError


def summarize_files(batch: Sequence[tuple[str, int]],
                    options: LoadOptions) -> list[list[RankSummary]] | TaskError:
    """Dask task: several files, one after the other (fewer, longer tasks on large jobs).

    A trace is read with the collector paused, and what it built then goes to the oldest
    generation (`advisor.gc_pause`), which only a full collection walks. Readers leave no
    reference cycles (the Kineto event mapper held its handlers as bound methods, and with
    them every event it mapped, until issue #39: a worker grew about 3 MB a torch.profiler
    rank), so reference counting frees a rank's graph when its summary is made. One full
    collection per task stays as a guard against a cycle a future reader might make: it
    bounds what could wait to one task's files. It was one per file, about 20 ms each in a
    Dask worker (the collection walks the worker's own 65,000 objects too): a sixth of a
    rank's cost."""
    import gc

    try:
        out = [summarize_file(path, order, options) for path, order in batch]
    except AdvisorError as e:
        return TaskError(e)
    finally:
        gc.collect()
    return out


def rank_findings(path: str, settings: RuleSettings | None, options: LoadOptions) -> dict | TaskError:
    """Dask task: the per-rank rules over one trace file, as plain findings, with the step the
    trace's own report gives (``step_ns``: the job view shows the same one as `advisor
    analyze`)."""
    from advisor.analysis import analyze_graph
    from advisor.engine.rank_summary import finding_record
    from advisor.ingest.base import load_trace

    try:
        analysis = analyze_graph(load_trace(path, options), settings=settings)
    except AdvisorError as e:
        return TaskError(e)
    return {"findings": [finding_record(f) for f in analysis.results.findings],
            "step_ns": analysis.results.baseline_step_ns,
            "pid": analysis.results.basis.pid if analysis.results.basis else None}


LOCAL_CONFIG = {} if os.environ.get("ADVISOR_DASK_DIAGNOSTICS") else {
    # Dask's own diagnostics, meant for its dashboard, which nobody looks at here: a worker
    # samples its task's stack every 10 ms and a monitor thread probes the GIL every 1 ms.
    # On a 2-core machine they take CPU from the trace parsing they would describe.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}


class JobCluster:
    """A Dask client for the length of one job analysis (a local cluster unless given one)."""

    def __init__(self, scheduler: str | None = None, workers: int | None = None,
                 tasks: int = 1) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as e:  # a dependency of advisor: only a broken install lacks it
            raise AdvisorError("multi-rank analysis needs dask[distributed] (pip install advisor "
                               "installs it)") from e
        self.cluster = None
        if scheduler:
            from advisor.job.scheduler import checked_address, connect_timeout, probe_scheduler

            address, timeout = checked_address(scheduler), connect_timeout()
            probe_scheduler(address, timeout)
            try:
                self.client = Client(address, timeout=timeout)
            except (OSError, asyncio.TimeoutError) as e:
                raise InputError(f"cannot reach the Dask scheduler at {address}: {e}") from e
        else:
            import dask

            n = local_workers(workers, tasks)
            with dask.config.set(LOCAL_CONFIG):
                self.cluster = LocalCluster(n_workers=max(1, n), threads_per_worker=1,
                                            processes=True, dashboard_address=":0",
                                            # the workers' own logging ("Compute Failed" and its
                                            # traceback) never reaches the user's terminal: an
                                            # error comes back as advisor's one line (TaskError)
                                            silence_logs=logging.CRITICAL)
                self.client = Client(self.cluster)

    def __enter__(self) -> JobCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def map(self, fn: Callable[..., Any], *iterables: Sequence[Any],
            progress: Callable[[int, int], None] | None = None, **kwargs: Any) -> list[Any]:
        """``fn`` over the iterables on the cluster; results in input order."""
        from dask.distributed import as_completed

        futures = self.client.map(fn, *iterables, pure=False, **kwargs)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[Any] = [None] * len(futures)
        for done, future in enumerate(as_completed(futures), start=1):
            result = future.result()  # an error advisor did not expect re-raises here
            if isinstance(result, TaskError):
                raise result.error
            out[index[future.key]] = result
            future.release()
            if progress:
                progress(done, len(futures))
        return out

    def summaries(self, paths: Sequence[Path], options: LoadOptions | None = None,
                  progress: Callable[[int, int], None] | None = None) -> list[RankSummary]:
        """Every file's rank summaries, in the order given. Files go to the workers in batches
        of about `BATCH_SECONDS` of work, so the scheduler handles a few hundred tasks even for
        thousands of ranks, and the batches stay small enough to balance over the workers."""
        options = options or LoadOptions()
        jobs = [(str(p), i) for i, p in enumerate(paths)]
        size = batch_size(len(jobs), self.worker_count())
        batches = [jobs[i:i + size] for i in range(0, len(jobs), size)]
        done = 0

        def step(_: int, __: int) -> None:
            nonlocal done
            done += 1
            if progress:
                progress(min(len(jobs), done * size), len(jobs))

        per_batch = self.map(summarize_files, batches, options=options, progress=step)
        return [s for batch in per_batch for summaries in batch for s in summaries]

    def worker_count(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1).get("workers", {})))

    def findings(self, paths: Sequence[str], settings: RuleSettings | None,
                 options: LoadOptions | None = None) -> list[dict]:
        return self.map(rank_findings, list(paths), settings=settings,
                        options=options or LoadOptions())


def local_workers(asked: int | None, tasks: int) -> int:
    """Worker processes of the local cluster: as asked (``--workers``), else one per core, and
    never more than the cores this process may run on or the tasks (ranks) to run: a worker
    beyond either only waits, and each is a process of its own (``--workers 64`` on two ranks
    started 70 processes, 4.3 GB)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = max(1, min(tasks, cores or 1))
    return max(1, min(asked or limit, limit))


def batch_size(files: int, workers: int, per_worker: int = 8) -> int:
    """Files per task: about ``per_worker`` tasks per worker, at most 16 files a task (a rank
    is a fraction of a second of work, a task's round trip a few milliseconds)."""
    return max(1, min(16, files // (workers * per_worker)))
