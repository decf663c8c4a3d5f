"""The whole run with every fix, the two kinds apart (issue #34): step fixes on the steady
steps' time, run fixes (worker restarts, checkpoints, evaluation) on the time outside them.

On nanoGPT's run on the H100 (it checkpoints with torch.save inside the loop; the session's
step states and the trace of the same run)."""

from __future__ import annotations

import pytest

from advisor.report.json_report import to_dict
from tests.capture.test_refit import UNPROFILED, profiled


def test_the_run_total_keeps_step_and_run_fixes_apart_and_adds_them():
    analysis, _ = profiled(UNPROFILED / "h100-2026-11-23d" / "run1" / "nanogpt-kineto",
                           "trace_rank0.json.gz")
    r, run = analysis.results, analysis.run
    total = run.total
    assert total is not None and total.run_ns == run.run_ns
    c = r.combined
    assert c is not None and all(p.rule in {f.rule for f in r.findings} for p in c.path)
    run_fixes = [f for f in r.findings if f.estimate.relative_to == "run"]
    assert [f.rule for f in run_fixes] == ["blocking-checkpoints"]
    assert not {f.rule for f in run_fixes} & {p.rule for p in c.path}  # never in the step path
    steady = run.parts_ns["steady"]
    assert total.step_fixes_saved_ns == pytest.approx(
        steady * (1 - c.predicted_step_ns / c.step_ns))
    assert total.run_fixes_saved_ns == pytest.approx(
        sum(f.estimate.saved_ns_per_step * run.steps for f in run_fixes))
    assert total.after_ns == pytest.approx(
        run.run_ns - total.step_fixes_saved_ns - total.run_fixes_saved_ns)
    # the run gains less than the step: the steady steps are only part of it
    assert 1 < total.speedup < c.speedup
    assert to_dict(analysis)["run"]["fixes_together"]["speedup"] == pytest.approx(total.speedup,
                                                                                   rel=1e-3)
