"""One rank the others wait for at every collective."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.job_model import Job
from advisor.engine.job_whatif import JobContext, JobEffect
from advisor.engine.rule import Finding, FixVariant, JobRequirement, Option
from advisor.job.rule import JobRule

CAUSES = {
    "input pipeline": "input-pipeline",
    "host work": "host-work",
    "slower kernels (clocks or a slower GPU)": "slower-kernels",
    "more work on this rank": "more-work",
    "slower communication links": "slower-links",
}
"""The straggler's cause (`advisor.engine.job_model.Straggler.cause`) -> the mechanism it names."""


class StragglerRank(JobRule):
    """One rank arrives last at the collectives and sets the whole job's pace.

    What it detects
    ---------------
    The rank whose late entries into collectives make up most of the job graph's critical path,
    and what it spent the extra time on, from its own trace: GPU idle with a longer data phase
    (input pipeline), GPU idle with the extra host time inside the phases every rank runs alike
    (forward, loss, backward, optimizer, as many times: a slower host, the CPU and not the code;
    named in the job view, no finding), GPU idle otherwise (host work outside those phases), the
    same kernels running slower (clocks or a slower GPU), more kernel time (more work), or longer
    transfers (links).

    Why it is slow
    --------------
    Every collective completes only when the last rank joins: the others spin in NCCL kernels
    for as long as the straggler lags, so one slow rank slows every GPU of the job.

    Evidence
    --------
    The straggler, the others' waiting per step, the difference by component.

    Example
    -------
    ```python
    loader = DataLoader(ds, num_workers=0 if rank == 1 else 8)  # one rank starved
    ```

    Use instead
    -----------
    ```python
    loader = DataLoader(ds, num_workers=8, pin_memory=True, persistent_workers=True)
    ```

    Speedup model
    -------------
    The straggler's own work per step falls to the median other rank's; the job's step is then
    the slowest rank's own work (low: half of the gap closed). A slower host (the same phases,
    longer) gets no finding: the trace shows that the CPU was slower, not why nor that a fix
    brings it back; the job view still names the straggler and its cause.

    Known false positives
    ---------------------
    A rank with a different role (pipeline stage, rank-0 evaluation) is slower by design.

    References
    ----------
    NCCL collectives' semantics; HTA straggler analysis.
    """

    code = "DIST002"
    name = "straggler-rank"
    requires = (JobRequirement.STEPS, JobRequirement.COLLECTIVES)
    options: ClassVar[Mapping[str, Option]] = {
        "min-pace-share": Option(0.5, "share of the job graph's critical path the slowest rank "
                                      "must set to be the straggler (below it, see "
                                      "load-imbalance)", minimum=0.0, maximum=1.0),
    }
    mechanisms: ClassVar[Mapping[str, str]] = {
        "input-pipeline": "the straggler's GPU idles with a longer data phase",
        "host-work": "the straggler's GPU idles while its host works outside the phases every "
                     "rank runs alike",
        "slower-kernels": "the same kernels run slower on the straggler",
        "more-work": "the straggler runs more kernel time than the others",
        "slower-links": "the straggler's transfers take longer",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant("input-pipeline",
                   "Feed the slow rank faster: more DataLoader workers, pinned memory, prefetch; "
                   "check its storage and CPU affinity",
                   "DataLoader(ds, num_workers=8, pin_memory=True, persistent_workers=True, "
                   "prefetch_factor=4)"),
        FixVariant("host-work",
                   "Move per-rank host work (rank-0 logging, checkpointing, evaluation) out of "
                   "the step or off the critical path",
                   "if rank == 0 and step % log_every == 0:  # not every step; or hand it to a "
                   "thread\n    log(metrics)"),
        FixVariant("slower-kernels",
                   "Check the slow rank's GPU: clocks, power or thermal throttling, a degraded "
                   "part",
                   "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE -i <gpu of that rank>",
                   kind="config"),
        FixVariant("more-work",
                   "Give every rank the same work: balance shards, sequence lengths, expert "
                   "routing",
                   "DistributedSampler(ds, drop_last=True)  # and pack/bucket sequences by length"),
        FixVariant("slower-links",
                   "Check the slow rank's interconnect (NVLink/IB link errors, topology, "
                   "NCCL_ALGO)", "nvidia-smi nvlink -s; NCCL_DEBUG=INFO", kind="config"),
    )
    model = ("job replay: the straggler's own work per step (GPU and host) at the median other "
             "rank's")
    assumptions = ("the other ranks' work does not change",)

    def check(self, job: Job, ctx: JobContext) -> Iterable[Finding]:
        s = job.straggler
        if s is None or job.pace.get(s.rank, 0.0) < float(self.option("min-pace-share")) \
                or s.excess_ns <= 0:
            return
        if s.cause.startswith("slower host"):
            # The same code ran slower on that rank's CPU. The trace shows that it did, not why
            # (oversubscribed cores, NUMA placement, clocks, the profiler's own cost differing
            # between ranks) nor that any fix brings it back: on the H200 2-GPU runs it was either
            # rank, by either profiler, in variants whose fixes measured nothing. The job view
            # names the straggler and this cause; no speedup is promised.
            return
        others = [r for r in job.rank_ids if r != s.rank]

        def closed(r, st, share=1.0, field="rank_busy_ns"):  # or the hosts' floors
            work = getattr(st, field)
            if r != s.rank or not work:
                return 0.0
            target = statistics.median(work.get(o, 0) for o in others)
            return share * max(0.0, work.get(r, 0) - target)

        def floor(r, st, share=1.0):
            return closed(r, st, share, "rank_floor_ns")

        own = [f["rule"] for f in job.rank_findings if s.rank in f["ranks"] and not f["all_ranks"]]
        parts = ", ".join(f"{k} {v / 1e6:+.2f} ms" for k, v in s.spent_on.items())
        message = (f"rank {s.rank} sets the job's pace ({job.pace[s.rank]:.0%} of the critical path): "
                   f"the others wait {s.others_waiting_ns / 1e6:.2f} ms per step for it; it spends "
                   f"{s.excess_ns / 1e6:.2f} ms more per step on its own work ({parts}); cause: {s.cause}"
                   + (f"; its own trace also shows {', '.join(own)}" if own else ""))
        q = {"straggler_rank": s.rank, "excess_ns": s.excess_ns, "others_waiting_ns": s.others_waiting_ns,
             **{f"spent_{k.split(' ')[0].lower()}_ns": v for k, v in s.spent_on.items()}, **s.evidence}
        yield ctx.finding(type(self), message, ctx.evidence(q), effects=(JobEffect(closed, floor),),
                          low_effects=(JobEffect(lambda r, st: closed(r, st, 0.5),
                                                 lambda r, st: floor(r, st, 0.5)),),
                          mechanism=CAUSES[s.cause], ranks=(s.rank,))
