"""The job section of a `Report`: what is said about a distributed job, fixed before any view.

A job's report is the one `Report` (`advisor.report.model`): its findings, those under the
threshold and the skipped rules are the job rules' (`Scope.JOB`), its step the job's (the slowest
rank's, per aligned step), and this section holds what only a job has: the ranks, their steps,
the collectives, the straggler and the per-rank rules' findings merged across ranks. The console,
JSON and HTML views render it (`advisor.report.job_view`, `html_report`); `advisor.report.job_report`
builds it from the cross-rank model, so this layer never reads a `Job`.

Times are nanoseconds here, as everywhere in the model; the views turn them into milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankRow:
    """One rank: where it came from and its medians per aligned step."""

    rank: int
    rank_source: str  # how its rank was known (trace metadata, file name, GPU order)
    path: str
    pid: int | None
    device: int | None
    gpu: str | None
    steps: int  # the steady steps its trace has
    step_source: str
    notes: tuple[str, ...]
    median_step_ns: float | None
    median_own_work_ns: float | None  # its step less the time it waited for other ranks
    median_comm_ns: float | None
    median_exposed_comm_ns: float | None  # communication with no compute beside it
    median_waiting_ns: float | None  # inside collectives, for a later rank
    median_host_floor_ns: float | None  # its host's own work (None: no steps of its own)
    pace_share: float  # share of the job graph's critical path it set
    report_step_ns: float | None  # `advisor analyze` of its trace alone (where rank rules ran)
    withheld: str | None  # why its steps cannot carry an estimate


@dataclass(frozen=True)
class JobStepRow:
    """One aligned step: the job's time (the slowest rank's) and each rank's, in `step_ranks`
    order."""

    index: int
    time_ns: int
    rank_time_ns: tuple[int, ...]
    rank_exposed_ns: tuple[int, ...]
    rank_waiting_ns: tuple[int, ...]
    rank_own_work_ns: tuple[int, ...]
    # Each rank's step window on its own trace's clock (GPU interval; the host's where the step
    # ran no GPU work): where the job page's timeline finds the step in the rank's trace.
    rank_window_ns: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class CollectiveRow:
    """One kind of collective, per step, mean over ranks."""

    kind: str
    count_per_step: int
    total_ns: float
    exposed_ns: float
    waiting_ns: float
    host_ns: float  # host time inside its calls


@dataclass(frozen=True)
class StragglerView:
    rank: int
    cause: str
    excess_ns: float  # its own work per step beyond the median other rank's
    others_waiting_ns: float
    spent_on_ns: Mapping[str, float]
    evidence: Mapping[str, float]

    @property
    def slower_host(self) -> bool:
        """The same phases ran longer on its CPU: named, no finding (see `straggler-rank`)."""
        return self.cause.startswith("slower host")


@dataclass(frozen=True)
class RankFindingRow:
    """A rank rule's findings, one row per rule, over the ranks that raised it."""

    rule: str
    code: str
    message: str
    fix: str
    fix_snippet: str
    fix_kind: str
    ranks: tuple[int, ...]
    all_ranks: bool
    speedup_min: float
    speedup_median: float
    speedup_max: float


@dataclass(frozen=True)
class JobSection:
    ranks: tuple[RankRow, ...]
    step_ranks: tuple[int, ...]  # the ranks of `JobStepRow`'s per-rank tuples, in order
    steps: tuple[JobStepRow, ...]
    collectives: tuple[CollectiveRow, ...]
    straggler: StragglerView | None
    rank_findings: tuple[RankFindingRow, ...]
    step_ns: float  # the job's step: median over aligned steps of the slowest rank's
    report_step_ns: float | None  # the slowest rank's own report step
    withheld: str | None  # why the job's estimates are withheld
    comm_share: float  # communication's share of the GPUs' kernel time
    overlap_share: float  # share of communication overlapped with compute
    pace_by_collective: Mapping[str, float]
    clock_offsets_ns: Mapping[int, int]
    notes: tuple[str, ...] = ()
    exposed_ns: float = 0.0  # median over ranks and steps: communication with no compute beside it
    host_floor_ns: float = 0.0  # the slowest rank's host's own work per step, median (0: unknown)
    has_collectives: bool = field(default=False)

    @property
    def straggler_rank(self) -> int | None:
        return self.straggler.rank if self.straggler is not None else None
