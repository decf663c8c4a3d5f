"""One rank's trace with exposed communication says where that time is judged (the job rules).

Real traces: a public DDP step (hta/df_index_resolver, V100, all-reduces after the backward
with no compute beside them), the 2-GPU DDP job's rank traces (fixtures/jobs), and a
single-GPU step without collectives.
"""

from __future__ import annotations

import pytest

from advisor.analysis import analyze
from advisor.graph.exposed_comm import exposed_comm_note
from tests.conftest import SCENARIOS, shared

ROOT = SCENARIOS.parent


def _note(a) -> str | None:
    return next((w for w in a.warnings if w.startswith("communication kernels take")), None)


def test_a_public_ddp_step_with_its_all_reduces_exposed_is_pointed_at_the_job_rules():
    a = analyze(shared("hta/df_index_resolver/df_index_resolver.json.gz"))
    note = _note(a)
    assert note is not None and "job rules" in note and "slowest peer" in note
    # every all-reduce of this step runs after the backward's compute: all of it exposed,
    # about a fifth of the step
    comm, exposed = (float(x.split()[-1]) for x in note.split(" ms")[:2])
    assert comm == exposed
    assert exposed > 0.1 * sum(s.time_ns for s in a.context.steps) / len(a.context.steps) / 1e6


@pytest.mark.parametrize("rel", ["jobs/h200x2-ddp/torch/baseline/rank0.json.gz",
                                 "jobs/h200x2-ddp/nsys/slow-rank.sqlite.gz"])
def test_the_ddp_jobs_rank_traces_carry_the_note(rel):
    a = analyze(ROOT / rel)
    assert _note(a) is not None


def test_a_single_gpu_step_without_collectives_has_no_note():
    a = analyze(SCENARIOS / "host-sync" / "bad" / "trace.json.gz")
    assert exposed_comm_note(a.graph, a.context.steps) is None
    assert _note(a) is None
