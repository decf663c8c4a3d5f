"""load-imbalance on a 4-rank job: synthetic ranks of the real HTA NCCL trace (tests/rank_synth.py,
``rotate``) where the late rank changes between collectives and steps, 3 ms at each wait.

The rule must be raised (and straggler-rank not: no rank sets most of the pace), and its saving
must be what the plant gives back when every rank's own work is at the mean:
``rank_synth.imbalance_saving_us`` per step. Deleting the rule or halving its saving fails here.
"""

from __future__ import annotations

import statistics

import pytest

from advisor.engine.job_model import build_job
from advisor.job.rule import run_job_rules
from tests import rank_synth
from tests.job.conftest import DELAY_US, WORLD


@pytest.fixture(scope="module")
def imbalanced(imbalanced_summaries):
    job = build_job(imbalanced_summaries)
    return job, {f.rule: f for f in run_job_rules(job)}


def test_the_pace_passes_between_ranks_and_no_straggler_is_blamed(imbalanced):
    job, found = imbalanced
    assert len(job.rank_ids) == WORLD
    assert max(job.pace.values()) < 0.5
    assert len([r for r, v in job.pace.items() if v >= 0.1]) >= 2
    assert "straggler-rank" not in found


def imbalance_miss(job, found: dict) -> str | None:
    """Why the job's findings miss the plant, or None: shared with tests/job/test_job_mutations.py."""
    f = found.get("load-imbalance")
    if f is None:
        return f"load-imbalance not raised ({sorted(found)})"
    if not set(f.ranks) >= {r for r, v in job.pace.items() if v >= 0.1}:
        return f"ranks {f.ranks} miss a pacer ({job.pace})"
    per_step = statistics.median(len(job.rank_steps[0][st.index].collectives) for st in job.steps)
    planted_ns = rank_synth.imbalance_saving_us(int(per_step), WORLD, DELAY_US) * 1000
    saved = f.estimate.step_ns - f.estimate.predicted_step_ns
    if abs(saved - planted_ns) > 0.10 * planted_ns:
        return f"saves {saved / 1e6:.2f} ms a step, the plant {planted_ns / 1e6:.2f} ms"
    return None


def test_load_imbalance_is_raised_with_the_planted_saving(imbalanced):
    job, found = imbalanced
    assert imbalance_miss(job, found) is None
    f = found["load-imbalance"]
    assert f.estimate.low < f.estimate.speedup  # low: half-way to balance
