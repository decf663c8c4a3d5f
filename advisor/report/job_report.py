"""The job's report: the cross-rank model (`Job`) as the one `Report` with its job section.

`build_job_report` is to a job what `advisor.report.model.build_report` is to one trace: it
fixes what is said (the job rules' findings, the job's step, the ranks, collectives, straggler
and the rank rules' merged findings) in the typed `Report`, which the console, JSON and HTML
views render (`advisor.report.job_view`, `advisor.report.html_report`). This layer builds it
because only it reads the `Job`; the report layer never does.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from advisor.engine.job_model import Job
from advisor.engine.rule import Category
from advisor.engine.runner import ReplayCheck
from advisor.graph.model import GpuInfo, StepSource, TraceInfo
from advisor.report.job_section import (
    CollectiveRow,
    JobSection,
    JobStepRow,
    RankFindingRow,
    RankRow,
    StragglerView,
)
from advisor.report.model import Report, ReportFinding, StepFigures, StepMark


def comm_share(job: Job) -> tuple[float, float]:
    """(communication share of GPU kernel time, share of communication overlapped with compute),
    over all ranks and aligned steps: HTA's two headline communication figures."""
    comm_k = all_k = comm = hidden = 0
    for r in job.rank_ids:
        for st in job.steps:
            s = job.rank_steps[r][st.index]
            comm_k += s.category_ns.get("communication", 0)
            all_k += sum(s.category_ns.values())
            comm += s.comm_ns
            hidden += s.comm_ns - s.exposed_comm_ns
    return (comm_k / all_k if all_k else 0.0, hidden / comm if comm else 0.0)


def _section(job: Job) -> JobSection:
    share, overlap = comm_share(job)
    med = {k: job.median_by_rank(k) for k in ("rank_time_ns", "rank_busy_ns", "rank_comm_ns",
                                              "rank_exposed_ns", "rank_waiting_ns",
                                              "rank_floor_ns")}
    ids = job.rank_ids
    s = job.straggler
    exposed = [st.rank_exposed_ns[r] for st in job.steps for r in ids]
    slowest = [max(st.rank_time_ns, key=st.rank_time_ns.get) for st in job.steps]
    floors = [st.rank_floor_ns.get(r, 0) for st, r in zip(job.steps, slowest, strict=True)]
    return JobSection(
        ranks=tuple(RankRow(
            rank=r.rank, rank_source=r.rank_source, path=r.path, pid=r.pid, device=r.device,
            gpu=r.gpu, steps=len(r.steps), step_source=r.step_source, notes=tuple(r.notes),
            median_step_ns=med["rank_time_ns"].get(r.rank),
            median_own_work_ns=med["rank_busy_ns"].get(r.rank),
            median_comm_ns=med["rank_comm_ns"].get(r.rank),
            median_exposed_comm_ns=med["rank_exposed_ns"].get(r.rank),
            median_waiting_ns=med["rank_waiting_ns"].get(r.rank),
            median_host_floor_ns=med["rank_floor_ns"].get(r.rank) or None,
            pace_share=job.pace.get(r.rank, 0.0), report_step_ns=r.report_step_ns,
            withheld=r.withheld) for r in job.ranks),
        step_ranks=tuple(ids),
        steps=tuple(JobStepRow(
            st.index, st.time_ns, tuple(st.rank_time_ns[r] for r in ids),
            tuple(st.rank_exposed_ns[r] for r in ids), tuple(st.rank_waiting_ns[r] for r in ids),
            tuple(st.rank_busy_ns[r] for r in ids),
            tuple((job.rank_steps[r][st.index].start_ns, job.rank_steps[r][st.index].end_ns)
                  for r in ids)) for st in job.steps),
        collectives=tuple(CollectiveRow(c.kind, c.count, c.total_ns, c.exposed_ns, c.waiting_ns,
                                        c.host_ns) for c in job.collectives),
        straggler=None if s is None else StragglerView(
            s.rank, s.cause, s.excess_ns, s.others_waiting_ns, dict(s.spent_on), dict(s.evidence)),
        rank_findings=tuple(RankFindingRow(
            f["rule"], f["code"], f["message"], f["fix"], f["fix_snippet"], f["fix_kind"],
            tuple(f["ranks"]), f["all_ranks"], f["speedup_min"], f["speedup_median"],
            f["speedup_max"]) for f in job.rank_findings),
        step_ns=job.step_ns, report_step_ns=job.report_step_ns, withheld=job.withheld,
        comm_share=share, overlap_share=overlap,
        pace_by_collective=dict(job.pace_collectives), clock_offsets_ns=dict(job.offsets_ns),
        notes=tuple(job.notes),
        exposed_ns=statistics.median(exposed) if exposed else 0.0,
        host_floor_ns=statistics.median(floors) if floors and all(floors) else 0.0,
        has_collectives=any(c.count for c in job.collectives),
    )


def _trace(job: Job) -> TraceInfo:
    """The job as the report's trace: the folder (or file) of its ranks, their formats and GPUs."""
    paths = sorted({r.path for r in job.ranks})
    where = paths[0] if len(paths) == 1 else os.path.commonpath(paths) or ", ".join(paths)
    formats = sorted({r.trace_format for r in job.ranks if r.trace_format})
    gpus = sorted({(r.device if r.device is not None else -1, r.gpu) for r in job.ranks if r.gpu})
    return TraceInfo(path=where, format=", ".join(formats),
                     gpus=[GpuInfo(d, name) for d, name in gpus])


def _steps(job: Job) -> StepFigures:
    times = tuple(st.time_ns for st in job.steps)
    sources = {r.step_source for r in job.ranks}
    source = StepSource.RANGES if "ranges" in sources or not times else StepSource.LAUNCH_PATTERN
    return StepFigures(
        count=len(times), source=source if times else StepSource.NONE, basis=None, warmup=0,
        marks=tuple(StepMark(st.index, False, st.time_ns) for st in job.steps),
        analysed_times_ns=times, median_ns=job.step_ns if times else None,
        mean_ns=statistics.mean(times) if times else None, busy_median_ns=None)


def build_job_report(job: Job) -> Report:
    """The job's `Report`: the job rules' findings, the job's step and the job section."""
    comm = Category.COMMUNICATION.value
    kernels: dict[str, float] = {}
    n = len(job.rank_ids) * len(job.steps)
    for r in job.rank_ids:
        for st in job.steps:
            for k, v in job.rank_steps[r][st.index].category_ns.items():
                kernels[k] = kernels.get(k, 0) + v / n
    return Report(
        trace=_trace(job), has_gpu_work=bool(kernels), steps=_steps(job),
        kernel_category_ns={k: int(v) for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])},
        top_kernels=(), whole_trace=None,
        findings=tuple(ReportFinding(f, comm) for f in job.findings),
        below_threshold=tuple(job.below_threshold), skipped=tuple(job.skipped), combined=None,
        baseline_step_ns=job.step_ns or None, replay=ReplayCheck(), job=_section(job))


def to_dict(job: Job) -> dict[str, Any]:
    """The job's JSON result (``advisor-job``), for library callers holding a `Job`."""
    from advisor.report.json_report import to_dict as report_dict

    return report_dict(build_job_report(job))
