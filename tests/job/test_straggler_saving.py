"""straggler-rank's saving on a real GPU-bound 2-GPU trace (nsys-ai's mfu_2gpu_before, two ranks in
one nsys file): there the straggler's extra work is on the GPU timeline (its GPU idles waiting on
its host, plus longer compute), so the GPU-side part of the saving is what the estimate rests on.

What the trace itself shows bounds it: the other rank waits ``others_waiting_ns`` per step for the
straggler, and a fix that brings the straggler to the others' pace gives at least that back; it
cannot give back more than the straggler's extra own work (``excess_ns``). Halving the GPU-side
saving puts it under the waiting (tests/job/test_job_mutations.py applies that mutation here).
"""

from __future__ import annotations

from advisor.engine.job_model import build_job
from advisor.ingest.base import LoadOptions
from advisor.job.cluster import summarize_file
from advisor.job.inputs import assign_ranks
from advisor.job.rule import run_job_rules
from tests.conftest import shared


def mfu_job():
    return build_job(assign_ranks(summarize_file(str(shared("nsys-ai/mfu_2gpu_before.sqlite")), 0,
                                                 LoadOptions())))


def straggler_miss(job) -> str | None:
    """Why the straggler finding misses what the trace bounds it by, or None."""
    s = job.straggler
    f = next((x for x in run_job_rules(job) if x.rule == "straggler-rank"), None)
    if s is None or f is None:
        return f"no straggler-rank finding (straggler {s})"
    saved = f.estimate.step_ns - f.estimate.predicted_step_ns
    if not s.others_waiting_ns <= saved <= s.excess_ns * 1.01:
        return (f"saves {saved / 1e3:.0f} µs a step; the other rank waits {s.others_waiting_ns / 1e3:.0f} "
                f"µs and the straggler's extra work is {s.excess_ns / 1e3:.0f} µs")
    return None


def test_the_straggler_saving_lies_between_the_waiting_and_the_extra_work():
    job = mfu_job()
    assert job.straggler.spent_on["compute kernels"] > 0  # some of the extra is GPU work
    assert straggler_miss(job) is None
