"""gemm-shape-alignment on real traces: unaligned tensor-core GEMMs (HTA's A100 TF32 trace with
sizes 647/30/15, a TimeSformer on the H100 with 3137-token BF16 score GEMMs) and aligned ones
(nanoGPT GPT-2, whose vocabulary is already padded to 50304; HF GPT-2's 50257 vocabulary runs
in FP32 on CUDA cores, where alignment does not pick the kernel: fp32-matmul's case).

HF GPT-2 in BF16 (run_clm.py, `advisor profile`, H100; fixtures/archive/unprofiled/h100-2026-11-23d) keeps
GPT-2's 50257-token vocabulary: its three logits GEMMs per step are the public example. The
padded step is not captured yet: benchmarks/scenarios/gemm-shape-alignment is that capture."""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

from advisor.rules.gemm_shape_alignment import MULTIPLE, GemmShapeAlignment, padded_flops, unaligned

from advisor.analysis import Analysis, analyze
from advisor.engine.rule import Finding
from tests.archive import readable
from tests.conftest import ROOT, shared

RULE = "gemm-shape-alignment"
HTA = shared("hta/trace_diff/control/control.json.gz")
TIMESFORMER = shared("tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz")
NANOGPT = ROOT / "fixtures" / "public" / "nanogpt" / "trace.json.gz"
HF_BF16 = (ROOT / "fixtures/archive/unprofiled/h100-2026-11-23d/public/hf_bf16_stack"
           / "trace_rank0.json.gz")


@cache
def run(path: str) -> Analysis:
    return analyze(readable(Path(path)), [RULE])


def finding(path) -> Finding | None:
    return next((f for f in run(str(path)).results.findings if f.rule == RULE), None)


def test_raised_on_unaligned_tf32_gemms_with_an_estimate():
    f = finding(HTA)
    assert f is not None
    q = f.evidence.quantities
    # the unaligned GEMMs ran well below the aligned GEMMs of their size in the same trace
    assert q["unaligned_tflops"] < q["aligned_reference_tflops"]
    assert q["unaligned_gemm_ns_per_step"] > 0 and q["unaligned_shapes"] >= 1
    assert "aten::bmm" in f.evidence.ranges
    est = f.estimate
    assert est is not None and est.speedup > 1.0 and est.low <= est.speedup <= est.high
    assert "647" in f.message and "multiple of 64" in f.fix.title


def test_raised_on_gpt2_vocabulary_of_50257_in_bf16():
    f = finding(HF_BF16)
    assert f is not None
    assert f.evidence.ranges == ("aten::mm",) and "50257" in f.message
    q = f.evidence.quantities
    assert q["unaligned_shapes"] == 3  # the logits GEMM and its two backward GEMMs
    # low-alignment CUTLASS kernels at ~95 TFLOP/s against ~700 for the aligned MLP GEMMs
    assert q["unaligned_tflops"] * 4 < q["aligned_reference_tflops"]
    assert 10e6 < q["unaligned_gemm_ns_per_step"] < 20e6
    assert 1.1 < f.estimate.speedup < 1.3
    assert f.fix.title.startswith("Pad 50257 to a multiple of 64")


def test_raised_on_bf16_score_gemms_of_a_3137_token_sequence():
    f = finding(TIMESFORMER)
    assert f is not None and "3137" in f.message
    assert f.evidence.quantities["unaligned_tflops"] < 100  # low-alignment CUTLASS kernels


def test_not_raised_on_aligned_gemms():
    a = run(str(NANOGPT))
    assert RULE not in [s.rule for s in a.results.skipped]  # it ran
    assert finding(NANOGPT) is None
    assert all(f.rule != RULE for f in a.results.below_threshold)


def test_unaligned_sizes_and_padding():
    from advisor.engine.efficiency import KernelEfficiency

    k = KernelEfficiency("k", "aten::mm", "gemm", "fp16/bf16", (1, 12288, 768, 50257), 3, 1000,
                         None, None, None, None)
    assert unaligned(k) == (50257,)
    assert padded_flops(k) == 2.0 * 3 * 12288 * 768 * 50304  # nanoGPT's padded vocabulary
    fp32 = KernelEfficiency("k", "aten::mm", "gemm", "fp32", (1, 8192, 768, 50257), 1, 1,
                            None, None, None, None)
    assert unaligned(fp32) == ()  # CUDA cores: not this rule's case
    assert MULTIPLE["fp16/bf16"] == 8 and MULTIPLE["fp8"] == 16 and MULTIPLE["tf32"] == 4


def test_documented():
    doc = inspect.getdoc(GemmShapeAlignment) or ""
    for section in ("What it detects", "Why it is slow", "Speedup model", "References"):
        assert section in doc
