"""`advisor gate` for distributed jobs: compare two runs by the job's step, name the rank and
the collective that regressed.

The job's step (the slowest rank's, per aligned step) is the sample; the test is the gate's own
one-sided Mann-Whitney U with the Hodges-Lehmann shift as the effect (`advisor.gate.stats`). A
regression is then attributed: the rank whose own work grew most, and the collective whose exposed
plus waiting time per step grew most.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from advisor.gate.stats import hodges_lehmann, mann_whitney
from advisor.job.model import Job
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

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1}.get(self.status, 2)


def _collective_cost(job: Job) -> dict[str, float]:
    return {c.kind: c.exposed_ns + c.waiting_ns for c in job.collectives}


def compare_jobs(base: Job, cand: Job, threshold: float) -> JobGateResult:
    b = [float(s.time_ns) for s in base.steps]
    c = [float(s.time_ns) for s in cand.steps]
    mw = mann_whitney(b, c)
    shift = hodges_lehmann(b, c)
    base_med = statistics.median(b)
    change = shift / base_med if base_med else 0.0
    bb, cb = base.median_by_rank("rank_busy_ns"), cand.median_by_rank("rank_busy_ns")
    common = sorted(set(bb) & set(cb))
    rank = max(common, key=lambda r: cb[r] - bb[r]) if common else None
    bc, cc = _collective_cost(base), _collective_cost(cand)
    kinds = set(bc) | set(cc)
    coll = max(kinds, key=lambda k: cc.get(k, 0.0) - bc.get(k, 0.0)) if kinds else None
    result = JobGateResult(
        status="pass", base_step_ns=base_med, cand_step_ns=statistics.median(c), change=change,
        p_value=mw.p_greater, rank=rank, rank_change_ns=(cb[rank] - bb[rank]) if rank is not None else 0.0,
        collective=coll, collective_change_ns=(cc.get(coll, 0.0) - bc.get(coll, 0.0)) if coll else 0.0)
    if len(base.ranks) != len(cand.ranks):
        result.status, result.reason = "inconclusive", (
            f"the runs have {len(base.ranks)} and {len(cand.ranks)} ranks: not the same job shape")
    elif change > threshold and mw.p_greater < ALPHA:
        result.status = "fail"
    elif change > threshold:
        result.status, result.reason = "inconclusive", (
            f"the job's step grew {change:.1%} but {len(b)} vs {len(c)} steps cannot tell it from "
            f"noise (p = {mw.p_greater:.2f}); record more steps")
    return result


def render(result: JobGateResult) -> str:
    head = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}[result.status]
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
    # the collective's name and the reason carry trace names: the output policy, line by line
    return no_ci_commands("\n".join(plain(x, 4000) for x in lines) + "\n")
