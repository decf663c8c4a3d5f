"""The efficiency model (FLOPs, bytes, roofline, MFU, tensor-core share) on real H100 captures:
nanoGPT GPT-2 (BF16, cuDNN attention, vocabulary padded to 50304), HF GPT-2 (FP32, vocabulary
50257, memory-efficient attention), the fp32-matmul scenario (FP32 and BF16 MLPs)."""

from __future__ import annotations

import statistics
from functools import lru_cache

import pytest

from advisor.engine.context import analysed_steps
from advisor.engine.efficiency import StepEfficiency, step_efficiency
from advisor.engine.gpus import lookup
from advisor.graph.flops import gemm_work, operator_work
from advisor.graph.kernels import KernelCategory, classify, input_shapes, launching_op
from advisor.graph.queries import steps_ops
from advisor.ingest.base import load_trace
from tests.conftest import ROOT

F = ROOT / "fixtures"
NANOGPT = F / "public" / "nanogpt" / "trace.json.gz"
HF = F / "public" / "hf-gpt2" / "trace.json.gz"
KINETO = sorted([*F.glob("scenarios/*/*/trace.json.gz"), *F.glob("public/*/trace.json.gz")])


@lru_cache(maxsize=4)
def _graph(path):
    return load_trace(path)


@lru_cache(maxsize=4)
def efficiency(path) -> StepEfficiency:
    g = _graph(path)
    steps = analysed_steps(g)
    return step_efficiency(g, steps, statistics.median(s.time_ns for s in steps))


def test_gemm_flops_are_two_m_n_k_of_the_recorded_operator():
    g = _graph(NANOGPT)
    r = next(r for r in g.ranges if r.name == "aten::mm"
             and input_shapes(r) == ((16384, 768), (768, 50304)))
    w = operator_work(r, input_shapes(r))
    assert w.flops == 2 * 16384 * 768 * 50304
    assert w.bytes == 2 * (16384 * 768 + 768 * 50304 + 16384 * 50304)  # BF16 A, B, C once
    # the same operator's kernels in the report carry launches x that
    k = next(k for k in efficiency(NANOGPT).kernels
             if k.op == "aten::mm" and k.sizes == (1, 16384, 768, 50304))
    assert k.flops == k.launches * 2 * 16384 * 768 * 50304
    assert k.bound == "compute" and 0 < k.of_roof <= 1


def test_addmm_and_linear_read_their_matrices_not_the_bias():
    assert gemm_work("aten::addmm", ((3072,), (8192, 768), (768, 3072), (), ()), 4).flops \
        == 2 * 8192 * 768 * 3072
    assert gemm_work("aten::linear", ((8, 1024, 768), (3072, 768), (3072,)), 2).flops \
        == 2 * 8 * 1024 * 768 * 3072
    assert gemm_work("aten::bmm", ((96, 1024, 64), (96, 64, 1024)), 2).flops \
        == 2 * 96 * 1024 * 64 * 1024
    bad = gemm_work("aten::mm", ((16384, 768), (769, 10)), 2)
    assert bad.flops is None and "inner sizes differ" in bad.reason


def test_causal_attention_flops_from_is_causal():
    k = {x.op: x for x in efficiency(NANOGPT).kernels}
    fwd, bwd = k["aten::_cudnn_attention_forward"], k["aten::_cudnn_attention_backward"]
    b, h, s, d = 16, 12, 1024, 64
    assert fwd.sizes == (b, h, s, s, d)
    assert fwd.flops == fwd.launches * 4 * b * h * s * s * d / 2  # causal: half the scores
    assert bwd.flops == bwd.launches * 2.5 * 4 * b * h * s * s * d / 2
    # HF GPT-2's memory-efficient kernels: (B, S, H, D) layout, causal as a mask type
    hf = {x.op: x for x in efficiency(HF).kernels}["aten::_efficient_attention_backward"]
    assert hf.sizes == (8, 12, 1024, 1024, 64) and hf.flops


def test_unknown_work_says_why_instead_of_guessing():
    adam = next(k for k in efficiency(NANOGPT).kernels if k.op == "aten::_fused_adamw_")
    assert adam.flops is None and adam.bytes is None and adam.of_roof is None
    assert "no work model" in adam.reason


@pytest.mark.parametrize(("name", "cap", "spec", "bf16", "tf32", "fp8", "gbs"), [
    ("NVIDIA H100 80GB HBM3", "9.0", "H100 SXM", 989, 495, 1979, 3350),
    ("NVIDIA H100 PCIe", "9.0", "H100 PCIe", 756, 378, 1513, 2000),
    ("NVIDIA H200", "9.0", "H200", 989, 495, 1979, 4800),
    ("NVIDIA A100-SXM4-80GB", "8.0", "A100", 312, 156, None, 2039),
    ("NVIDIA B200", "10.0", "B200", 2250, 1100, 4500, 8000),
])
def test_peaks_by_device_name(name, cap, spec, bf16, tf32, fp8, gbs):
    s = lookup(name, cap)
    assert (s.name, s.bf16, s.tf32, s.fp8, s.bandwidth_gbs) == (spec, bf16, tf32, fp8, gbs)


def test_the_peaks_come_from_the_traces_device():
    assert efficiency(NANOGPT).gpu == "H100 SXM"  # Kineto deviceProperties
    assert efficiency(NANOGPT).peak_tflops == 989 and efficiency(NANOGPT).precision == "fp16/bf16"
    assert efficiency(HF).peak_tflops == 67 and efficiency(HF).precision == "fp32"


def _gemms_have_shapes(path) -> bool:
    """Whether some GEMM kernel of the analysed steps ran under an operator with shapes
    (compiled and CUDA-graph steps launch theirs outside any operator range)."""
    g = _graph(path)
    return any(classify(o) is KernelCategory.GEMM and (r := launching_op(g, o)) is not None
               and input_shapes(r) for o in steps_ops(g, analysed_steps(g)))


@pytest.mark.parametrize("path", KINETO, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_mfu_is_physical_on_every_fixture_with_shapes(path):
    e = efficiency(path)
    if not _gemms_have_shapes(path):
        assert e.mfu is None and e.reason == "no GEMM or attention operator with recorded shapes"
        return
    assert e.mfu is not None, e.reason
    assert 0 < e.mfu <= 1
    big = [k for k in e.kernels if k.time_ns > 1e6 and k.of_roof is not None]
    assert all(k.of_roof <= 1.05 for k in big if k.flops)  # no kernel above its datatype's peak
    # minimum bytes against HBM: operands left in the 50 MB L2 by the previous kernel can beat
    # it a little (HF GPT-2's in-place residual add_, 25 MB operands: 1.10x)
    assert all(k.of_roof <= 1.25 for k in big if not k.flops)


def test_mfu_counts_what_most_fixtures_record():
    """Most captures recorded shapes: the test above is not vacuous."""
    assert sum(_gemms_have_shapes(p) for p in KINETO) >= 20


def test_fp8_scaled_mm_runs_against_the_fp8_peak():
    e = efficiency(F / "scenarios" / "fp8-candidate" / "good" / "trace.json.gz")
    assert e.precision == "fp8" and e.peak_tflops == 1979 and 0 < e.mfu <= 1


def test_tensor_core_share_tells_fp32_from_bf16_gemms():
    bad = efficiency(F / "scenarios" / "fp32-matmul" / "bad" / "trace.json.gz")
    good = efficiency(F / "scenarios" / "fp32-matmul" / "good" / "trace.json.gz")
    assert bad.tensor_core_share == 0.0 and bad.precision == "fp32"
    assert good.tensor_core_share > 0.95 and good.precision == "fp16/bf16"
    assert efficiency(NANOGPT).tensor_core_share == 1.0


def test_nsys_without_operator_shapes_has_no_mfu_and_says_why():
    e = efficiency(F / "public" / "nanogpt" / "nsys.sqlite.gz")
    assert e.mfu is None and "no GEMM or attention operator" in e.reason
    assert e.tensor_core_share == 1.0  # from kernel names alone


def test_nsys_shape_probe_gives_gemm_flops():
    e = efficiency(F / "public" / "hf-gpt2" / "nsys.sqlite.gz")
    assert e.mfu is not None and 0 < e.mfu <= 1
    assert any(k.sizes == (1, 8192, 768, 50257) and k.flops for k in e.kernels)
