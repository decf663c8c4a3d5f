"""The step time advisor reports from a trace matches the step time measured without a profiler.

Each H100 scenario was timed with no profiler attached (>= 30 steps after warm-up, CUDA events
at step boundaries) and captured under Nsight Systems. A profiler slows the host, so a
host-bound step is slower in its trace than in the job: advisor reports the trace's step time
and the step replayed without the profiler's host overhead (``steps.unprofiled_mean_ms``). The
latter must agree with the measurement within 10%; where the GPU sets the pace both do.
"""

from __future__ import annotations

import json

import pytest

from advisor.analysis import analyze
from tests import validation_data as vd
from tests.conftest import SCENARIOS

CASES = sorted(
    (p.parent.parent.name, p.parent.name)
    for p in SCENARIOS.glob("*/*/nsys.sqlite.gz")
    if (p.parent / "timing.json").exists()
) if SCENARIOS.exists() else []


def measured_mean_ms(timing: dict) -> float:
    return vd.mean_ms(timing)


# Measured misses, kept visible (strict: they fail the suite once the model gets them right).
KNOWN_MISSES = {
    ("cpu-bound-loss", "bad"): "a sync-heavy per-sample loop runs 2x slower under nsys (41.6 vs "
    "20.8 ms median): the per-call overhead model removes only half of it",
    ("rng-bound-dropout", "good"): "hand-written Triton kernels launch through cuLaunchKernel, "
    "whose nsys overhead is larger than the per-call model (14.4 vs 11.6 ms)",
    ("loader-jitter", "bad"): "random reallocation steps: the mean of the 12 traced steps has a "
    "standard error of ~18% against the 49 timed ones",
}


@pytest.mark.skipif(not CASES, reason="no H100 scenario captures in fixtures/scenarios")
@pytest.mark.parametrize(("rule", "variant"), CASES)
def test_reported_step_time_matches_unprofiled_measurement(rule, variant, unpacked, request):
    if (rule, variant) in KNOWN_MISSES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_MISSES[(rule, variant)], strict=True))
    d = SCENARIOS / rule / variant
    timing = json.loads((d / "timing.json").read_text())
    analysis = analyze(unpacked(d / "nsys.sqlite.gz"))
    reported = analysis.results.replay.unprofiled_mean_ns / 1e6
    measured = measured_mean_ms(timing)
    assert abs(reported - measured) / measured <= 0.10, (
        f"{rule}/{variant}: reported {reported:.3f} ms, measured {measured:.3f} ms")
