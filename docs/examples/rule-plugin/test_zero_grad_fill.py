"""The template rule on real traces: a ResNet-50 job on PyTorch 1.8 (zero_grad fills every
gradient) must raise it, an H100 job on PyTorch 2.11 (set_to_none by default) must not.

Copy this file with the rule; point the two paths at a trace of your own anti-pattern and at one
of its fix (`advisor profile` writes them), and keep the assertions about what you can read off
the trace itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zero_grad_fill import ZeroGradFill

from advisor.engine.rule import DOC_SECTIONS
from advisor.engine.runner import run_rules
from advisor.ingest.base import load_trace

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO.parent / "shared" / "traces" / "kineto" / "tb_plugin_samples"
RESNET50 = [TRACES / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz",
            TRACES / "resnet50_num_workers_4" / "worker0.1623212756351.pt.trace.json.gz"]
FIXED = REPO / "fixtures" / "scenarios" / "host-sync" / "bad" / "trace.json.gz"
RESNET50_PARAMETER_TENSORS = 161  # 53 convolutions, 53 batch norms x 2, the classifier x 2


def _matches(path: Path, options: dict | None = None):
    results = run_rules(load_trace(path), [ZeroGradFill], options)
    return results.findings + results.below_threshold  # every match, worth reporting or not


@pytest.mark.parametrize("trace", RESNET50, ids=lambda p: p.parent.name)
def test_a_zero_grad_that_fills_every_gradient_is_found(trace):
    (finding,) = _matches(trace)
    q = finding.evidence.quantities
    assert q["fill_kernels_per_step"] == RESNET50_PARAMETER_TENSORS  # one kernel per parameter
    assert q["zero_grad_host_ns_per_step"] > 1e6  # milliseconds of host time per step
    assert finding.estimate.low <= finding.estimate.speedup <= finding.estimate.high
    # The host time saved bounds the gain: the GPU work of the step does not get faster.
    saved = finding.estimate.step_ns - finding.estimate.predicted_step_ns
    assert 0 < saved <= q["zero_grad_host_ns_per_step"] + q["fill_gpu_ns_per_step"]


def test_set_to_none_is_not_reported():
    graph = load_trace(FIXED)
    assert any("zero_grad" in r.name for r in graph.ranges)  # zero_grad ran, and filled nothing
    assert _matches(FIXED) == []


def test_the_host_share_option_moves_the_estimate():
    keep_all = _matches(RESNET50[0], {"zero-grad-fill": {"host-share": 1.0}})[0].estimate
    keep_none = _matches(RESNET50[0], {"zero-grad-fill": {"host-share": 0.0}})[0].estimate
    assert keep_none.speedup > keep_all.speedup >= 1.0


def test_the_docs_have_every_section_in_order():
    """The docstring holds every section but "Use instead", which the declared fixes write."""
    assert tuple(ZeroGradFill.documented_sections()) == DOC_SECTIONS
    assert "Use instead" not in ZeroGradFill.doc_sections()
