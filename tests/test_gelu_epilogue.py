"""unfused-gemm-gelu in training: the epilogue must also write the pre-activation (issue 35).

Wave 12 timed the rule's fix on the H200 (`benchmarks/public/wave12_gelu.sh`): the GEMM+GELU site
through one cuBLASLt GEMM with the GELU_AUX_BIAS epilogue, as Transformer Engine trains. Its
kernel check (`gelu_epilogue.py --check`, CUDA-graph replays at seven fc1 shapes) showed the fused
GEMM saving at most about half the GELU kernel's time, the share the rule now prices where a
backward pass reads the pre-activation. These tests read that archive and the fixtures, all real
captures.
"""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from advisor.rules import unfused_gemm_gelu as rule

from advisor.analysis import analyze
from advisor.graph.kernels import has_gelu_epilogue, is_gelu
from tests.archive import archived
from tests.conftest import ROOT
from tests.healthy_findings import ARCHIVE, WAVE12

FIXTURES = ROOT / "fixtures"
CAPTURES = sorted((ARCHIVE / WAVE12 / "captures").glob("trace_*.json.xz"))
"""Stored as xz (fixtures/archive/README.md); `archived` gives each back as gzip."""


def _finding(path):
    found = [f for f in analyze(path).results.findings if f.rule == "unfused-gemm-gelu"]
    return found[0] if found else None


def test_the_aux_share_is_the_floor_the_epilogue_measured():
    """The share of a GELU's time the fused GEMM keeps (1 - its GPU saving), at seven shapes in
    two calls: never clearly under the half the memory traffic leaves (the point estimate's
    share), most often a little over it; the pessimistic share at or above every one."""
    rows = [r for name in ("check.json", "check-call6.json")
            for r in json.loads((ARCHIVE / WAVE12 / name).read_text())]
    assert len(rows) == 14
    kept = sorted(1 - r["gpu_saving_ms"] / r["gelu_ms"] for r in rows)
    assert kept[0] >= rule.AUX_WRITE_SHARE - 0.05, kept
    assert rule.AUX_WRITE_SHARE <= statistics.median(kept) <= rule.AUX_WRITE_SHARE + 0.1, kept
    assert kept[-1] <= rule.AUX_KEEP_LOW
    # and the fix is the same computation: bf16-level error against eager's tanh GELU, in all
    # of the forward and the three gradients
    for r in rows:
        assert max(r["rel_err_vs_tanh"].values()) < 0.01, r


def test_every_timed_step_has_its_fixed_capture():
    """One capture per fixed step the fix was timed on (the store restores them: an empty list
    would leave the test below with nothing to check)."""
    stems = {p.name.removeprefix("trace_").removesuffix(".json.xz") for p in CAPTURES}
    assert stems == {"fit-pageable-memcpy", "check-pageable-memcpy", "check-fp32-matmul",
                     "fit-unfused-attention", "fit-compiler-fusion", "check-compiler-fusion"}


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_the_fixed_steps_raise_nothing_and_hold_the_fused_gemm(capture):
    """The fix's own torch.profiler captures (H200): no GELU kernel runs after a GEMM any more,
    the epilogue GEMM is read as a GEMM (not as a GELU), and the rule is silent."""
    capture = archived(capture.relative_to(ARCHIVE.parent).with_suffix(".gz"))
    with gzip.open(capture) as f:
        trace = json.loads(f.read())
    names = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    fused = [n for n in names if has_gelu_epilogue(n)]
    assert fused and not any(is_gelu(n) for n in fused), fused
    assert _finding(capture) is None


@pytest.mark.parametrize("label", [
    "scenarios/pageable-memcpy/good/nsys.sqlite.gz",
    "scenarios/pageable-memcpy/good/trace.json.gz",
    "scenarios-check/pageable-memcpy/good/trace.json.gz",
])
def test_a_training_forward_keeps_the_pre_activation_for_every_pair(label):
    f = _finding(FIXTURES / label)
    q = f.evidence.quantities
    assert q["pairs_keeping_pre_activation_per_step"] == q["gemm_gelu_pairs_per_step"] == 2
    assert "write the pre-activation" in f.message
    assert f.estimate.low == pytest.approx(1.0, abs=1e-3)  # the epilogue may give all of it back


@pytest.mark.parametrize("label", [
    "scenarios/unfused-gemm-gelu/bad/nsys.sqlite.gz",
    "scenarios/unfused-gemm-gelu/bad/trace.json.gz",
    "scenarios-check/unfused-gemm-gelu/bad/trace.json.gz",
])
def test_a_checkpointed_no_grad_pass_keeps_none(label):
    """The planted scenario's first pass runs without autograd (reentrant checkpointing): its
    GELUs are recomputed in the backward phase, whose own GELU backward kernels read the
    recomputation's pre-activation, so the first pass's epilogue writes only the activation."""
    f = _finding(FIXTURES / label)
    q = f.evidence.quantities
    assert q["gemm_gelu_pairs_per_step"] >= 4
    assert q["pairs_keeping_pre_activation_per_step"] == 0
    assert f.estimate.low > 1.01
