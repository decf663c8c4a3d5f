"""What autocast changes, kernel class by kernel class, on real H100 FP32 steps (issue #33).

timm's ResNet-50 under `advisor profile --try bf16` was estimated at 1.27x and measured 1.12x:
its convolutions already ran in TF32 (cuDNN's default), which the rule read as FP32 on CUDA
cores and sped up 14.8x; batch norm was kept in FP32 like a LayerNorm; cuDNN's workspace
kernels were sped up as if they were convolutions; autocast's casts cost the host nothing. The
traces here are the ones we hold: timm's train.py on ResNet-18 (same script and library, H100,
FP32, fixtures/source-lines/traces/timm) and Lightning's ViT-B/16 in 32-true and bf16-mixed
(fixtures/public/lightning-vit-b)."""

from __future__ import annotations

import json

import pytest
from advisor.rules.fp32_matmul import (
    AUTOCAST_KEEP,
    AUXILIARY,
    CASTS_PER_GEMM_KERNEL,
    Fp32Matmul,
    autocast_keep,
)

from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.effects import AddDispatches, SetOpDurations
from advisor.engine.gpus import lookup
from advisor.engine.hardware import MIN_KERNEL_NS
from advisor.graph.kernels import KernelCategory, classify
from advisor.ingest.base import load_trace
from tests.conftest import ROOT

TIMM = ROOT / "fixtures" / "source-lines" / "traces" / "timm" / "trace_rank0.json.gz"
LIGHTNING = ROOT / "fixtures" / "public" / "lightning-vit-b"
MEASURED = json.loads((ROOT / "fixtures" / "public" / "measured.json").read_text())


def _check(path):
    graph = load_trace(path)
    ctx = RuleContext(graph, analysed_steps(graph))
    found = list(Fp32Matmul().check(graph, ctx))
    assert len(found) == 1
    return graph, ctx, found[0]


@pytest.fixture(scope="module")
def timm():
    return _check(TIMM)


def test_tf32_convolutions_gain_the_tf32_to_bf16_ratio(timm):
    graph, _, f = timm
    h100 = lookup("H100")
    q = f.evidence.quantities
    assert f.fix.mechanism == "tf32-gemms" and "TF32" in f.message
    assert q["tf32_to_16bit_ratio"] == pytest.approx(989 / 495)
    assert q["tf32_gemm_ns_per_step"] > 20 * q["fp32_gemm_ns_per_step"]  # one FP32 conv in 70
    ops = {o.id: o for o in graph.gpu_ops}
    durations = next(e for e in f.effects if isinstance(e, SetOpDurations)).durations
    tf32 = [(ops[i], ns) for i, ns in durations if "tf32" in ops[i].name]
    assert len(tf32) > 50
    for op, ns in tf32:  # halved, not divided by FP32's 14.8
        assert ns == max(min(op.duration_ns, MIN_KERNEL_NS), int(op.duration_ns / h100.tf32_to_16bit))


def test_cudnn_workspace_and_split_k_kernels_are_not_sped_up(timm):
    graph, _, f = timm
    aux = [o for o in graph.gpu_ops if classify(o) in (KernelCategory.GEMM, KernelCategory.CONV)
           and AUXILIARY.search(o.name)]
    assert aux  # init_device_workspace_kernel: 91 in the window
    changed = {i for e in f.effects if isinstance(e, SetOpDurations) for i, _ in e.durations}
    assert not changed & {o.id for o in aux}


def test_batch_norm_keeps_what_16_bit_ops_keep_and_layer_norm_stays_fp32(timm):
    graph, _, _ = timm
    bn = [o for o in graph.gpu_ops if classify(o) is KernelCategory.NORM]
    assert bn and all("bn_" in o.name for o in bn)  # cuDNN's batch norm, the only norm here
    assert {autocast_keep(o) for o in bn} == {AUTOCAST_KEEP[KernelCategory.ELEMENTWISE]}
    vit = load_trace(LIGHTNING / "nsys.sqlite.gz")
    ln = [o for o in vit.gpu_ops if classify(o) is KernelCategory.NORM]
    assert ln and all("layer_norm" in o.name for o in ln)
    assert {autocast_keep(o) for o in ln} == {AUTOCAST_KEEP[KernelCategory.NORM]}


def test_autocast_casts_cost_the_host_of_a_step_that_turns_host_bound():
    """Lightning's ViT-B in bf16-mixed is host-bound (66.3 ms measured, 34.9 ms of GPU time):
    the casts autocast adds (156 more kernels a step, measured) are time it gains less. The
    replay with them lands within 5% of the measured speedup; without them 8% high."""
    graph, ctx, f = _check(LIGHTNING / "nsys.sqlite.gz")
    casts = [e for e in f.effects if isinstance(e, AddDispatches)]
    assert len(casts) == 1 and casts[0].per_call == CASTS_PER_GEMM_KERNEL
    per_step = CASTS_PER_GEMM_KERNEL * len(casts[0].call_ids) / len(ctx.steps)
    assert 50 < per_step < 156  # a lower bound of the casts the bf16 step launched
    without = [e for e in f.effects if not isinstance(e, AddDispatches)]
    _, after = ctx.before_after(f.effects)
    _, after_without = ctx.before_after(without)
    longest_launch = max(c.duration_ns for c in graph.api_calls if c.id in set(casts[0].call_ids))
    added = after - after_without
    assert 0 < added <= per_step * (ctx.simulation().dispatch_ns + longest_launch)
    measured = MEASURED["lightning-vit-b"]["step_ms"]
    truth = measured["32-true"] / measured["bf16-mixed"]
    assert f.estimate.speedup == pytest.approx(truth, rel=0.05)
    assert ctx.speedup(without) > 1.05 * truth
