"""Ranks doing unequal work, with no single straggler to blame."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.job_model import Job
from advisor.engine.job_whatif import JobContext, JobEffect
from advisor.engine.rule import Finding, FixVariant, JobRequirement, Option
from advisor.job.rule import JobRule


class LoadImbalance(JobRule):
    """Several ranks take turns holding the job back: the work is spread unevenly.

    What it detects
    ---------------
    Ranks' own work per step (step time minus waiting) differs, and no single rank sets most of
    the critical path: the pace passes between ranks (uneven sequence lengths, data-dependent
    work, MoE routing).

    Why it is slow
    --------------
    At each collective the job waits for whichever rank got the most work this time; the job's
    step is the maximum over ranks, not the mean.

    Evidence
    --------
    Per-rank own work per step, its spread, the ranks on the critical path.

    Example
    -------
    ```python
    sampler = DistributedSampler(ds)  # variable-length samples, no length bucketing
    ```

    Use instead
    -----------
    ```python
    # pack sequences to a fixed token budget per rank, or bucket by length across ranks
    ```

    Speedup model
    -------------
    Every rank's own work per step at the mean over ranks (perfect balance; low: half-way).

    Known false positives
    ---------------------
    Ranks with different roles by design (pipeline stages).

    References
    ----------
    HTA temporal breakdown across ranks.
    """

    code = "DIST003"
    name = "load-imbalance"
    requires = (JobRequirement.STEPS, JobRequirement.THREE_RANKS)
    options: ClassVar[Mapping[str, Option]] = {
        "max-pace-share": Option(0.5, "a rank setting this share of the critical path or more "
                                      "is a straggler (straggler-rank), not an imbalance",
                                 minimum=0.0, maximum=1.0),
        "pacer-share": Option(0.1, "share of the critical path a rank sets to be named among "
                                   "the ranks the pace passes between", minimum=0.0, maximum=1.0),
    }
    mechanisms: ClassVar[Mapping[str, str]] = {
        "uneven-work": "the ranks get unequal work per step (lengths, data-dependent work, "
                       "routing)",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant("uneven-work",
                   "Balance the work per rank: pack or length-bucket samples, even shards",
                   "# e.g. pack sequences to a fixed number of tokens per rank and step"),
    )
    model = "job replay: every rank's own work at the mean over ranks"
    assumptions = ("work can be moved between ranks",)

    def check(self, job: Job, ctx: JobContext) -> Iterable[Finding]:
        if not job.pace or max(job.pace.values()) >= float(self.option("max-pace-share")):
            return  # one dominant rank: that is `straggler-rank`

        def balanced(r, st, share=1.0, field="rank_busy_ns"):  # or the hosts' floors
            work = getattr(st, field)
            if not work:
                return 0.0
            return share * max(0.0, work.get(r, 0) - statistics.mean(work.values()))

        def floor(r, st, share=1.0):
            return balanced(r, st, share, "rank_floor_ns")

        busy = job.median_by_rank("rank_busy_ns")
        spread = max(busy.values()) - min(busy.values())
        pacers = [r for r, v in job.pace.items() if v >= float(self.option("pacer-share"))]
        yield ctx.finding(
            type(self),
            f"ranks' own work per step spans {spread / 1e6:.2f} ms and the pace passes between ranks "
            f"{', '.join(map(str, pacers[:8]))}", ctx.evidence({"busy_spread_ns": spread}),
            effects=(JobEffect(balanced, floor),),
            low_effects=(JobEffect(lambda r, st: balanced(r, st, 0.5), lambda r, st: floor(r, st, 0.5)),),
            mechanism="uneven-work", ranks=pacers)
