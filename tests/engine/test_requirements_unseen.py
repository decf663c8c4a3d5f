"""What a rule says on public traces it was not built on: a GPU outside advisor's table, a trace
that names no GPU, too few steps for a spread, and estimate bands in order.

Found by an audit of ../shared/traces (2026-12-03): fp32-matmul applied an H100's 14.8x ratio to
a Quadro GP100 (no tensor cores) and an AMD MI250 (whose FP32 GEMMs already run on its matrix
cores), and stated "on the H100 SXM" as a fact on a trace that names no GPU; loader-jitter
stayed silent on a one-step trace without saying why; a withheld estimate below no gain had its
band inverted (low 1.0 above high 0.93).
"""

from __future__ import annotations

import pytest

from advisor.analysis import analyze
from advisor.engine.rule import MIN_SPREAD_STEPS
from tests.conftest import SHARED_TRACES, shared

GP100 = "hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz"
MI250 = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
NO_GPU = "nsys-ai/h100_2gpu_1s.sqlite"  # TARGET_INFO_GPU absent
V100 = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
ONE_STEP = "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz"


def _skipped(a) -> dict[str, str]:
    return {x.rule: x.reason for x in a.results.skipped}


@pytest.mark.parametrize("rel, device", [(GP100, "Quadro GP100"), (MI250, "AMD")])
def test_a_gpu_outside_the_table_skips_the_precision_rules_and_says_why(rel, device):
    a = analyze(shared(rel))
    skipped = _skipped(a)
    for rule in ("fp32-matmul", "fp8-candidate"):
        assert device in skipped[rule] and "rates advisor knows" in skipped[rule]
    raised = [f.rule for f in (*a.results.findings, *a.results.below_threshold)]
    assert "fp32-matmul" not in raised and "fp8-candidate" not in raised


def test_a_trace_naming_no_gpu_is_read_as_an_h100_and_says_it_assumed_so():
    a = analyze(shared(NO_GPU))
    assert not any(g.name for g in a.graph.info.gpus)
    f = next(f for f in (*a.results.findings, *a.results.below_threshold)
             if f.rule == "fp32-matmul")
    assert f.message.endswith("on the H100 SXM (assumed: the trace names no GPU)")
    assert f.estimate.assumptions[0] == "the trace names no GPU: an H100 SXM's rates are assumed"


def test_a_gpu_in_the_table_is_named_without_an_assumption():
    a = analyze(shared(V100))
    f = next(f for f in a.results.findings if f.rule == "fp32-matmul")
    assert f.message.endswith("on the V100")
    assert not any("names no GPU" in s for s in f.estimate.assumptions)
    assert "fp32-matmul" not in _skipped(a)
    # no TF32 on a V100: the band reaches down to the non-tensor 16-bit rate (2x), not to the
    # tensor-core peak it was pinned at (2.22-2.32x before)
    assert f.estimate.low < 0.8 * f.estimate.speedup


def test_too_few_steps_for_a_spread_skips_loader_jitter_and_says_why():
    a = analyze(shared(ONE_STEP))
    assert len(a.context.steps) < MIN_SPREAD_STEPS
    assert _skipped(a)["loader-jitter"].startswith(
        f"{len(a.context.steps)} steady-state step")


def _every_trace() -> list[str]:
    if not SHARED_TRACES.exists():
        return []
    return sorted(str(p.relative_to(SHARED_TRACES)) for p in SHARED_TRACES.rglob("*")
                  if p.name.endswith((".sqlite", ".json", ".json.gz")))


@pytest.mark.parametrize("rel", _every_trace())
def test_every_estimate_band_holds_its_estimate(rel):
    """low <= speedup <= high for every finding and every match under the threshold, withheld
    or not: a withheld estimate's band reaches down to no gain, never above its own value."""
    a = analyze(shared(rel))
    for f in (*a.results.findings, *a.results.below_threshold):
        e = f.estimate
        assert e.low <= e.speedup + 1e-9 and e.speedup <= e.high + 1e-9, (f.rule, e)
        if e.withheld:
            assert e.low <= 1.0
