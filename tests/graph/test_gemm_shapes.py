"""GEMM sizes from an nsys trace's shape probe, on the HF run_clm.py GPT-2 FP32 capture that
`advisor profile --nsys` took on the H100 (fixtures/public/hf-gpt2/nsys.sqlite.gz)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from advisor.engine.context import analysed_steps
from advisor.graph.gemm_shapes import (
    SHAPE_PROBE_RANGE,
    candidate_sizes,
    launched_gemm_sizes,
    operator_name,
    signature,
)
from advisor.graph.kernels import KernelCategory, classify
from advisor.ingest.base import load_trace
from tests.conftest import ROOT

HF_NSYS = ROOT / "fixtures" / "public" / "hf-gpt2" / "nsys.sqlite.gz"
VOCAB = 50257


@pytest.fixture(scope="module")
def graph():
    return load_trace(HF_NSYS)


def test_emit_nvtx_ranges_name_their_operator():
    assert operator_name("aten::addmm, seq = 2700, op_id = 123, sizes = [[2304], [8192, 768]]") \
        == "aten::addmm"
    assert operator_name("aten::mm") == "aten::mm"


def test_the_probe_is_read_apart_from_the_analysed_steps(graph):
    # the probe step's sizes are there, GPT-2's vocabulary GEMMs among them ...
    sizes = {s for entries in graph.probe_gemm_sizes.values() for s, _ in entries}
    assert (8192, 768, VOCAB) in sizes  # logits: (8192 x 768)(768 x 50257)
    assert any(VOCAB in s[1:2] for s in sizes)  # a backward GEMM with K = 50257
    # ... and neither the probe step nor its operator ranges reach the analysed window
    assert all(SHAPE_PROBE_RANGE not in s.name for s in graph.steps)
    assert not [r for r in graph.ranges if r.name.startswith("aten::")]
    assert all(launched_gemm_sizes(graph, o) is None for o in graph.gpu_ops[:2000])


def test_a_signature_shared_by_two_problems_is_told_apart_by_duration(graph):
    # cuBLAS runs the (8192 x 3072)(3072 x 768) and (8192 x 50257)(50257 x 768) backward GEMMs
    # with one split-K kernel on one grid: the same signature, 16x apart in work
    shared = {k: v for k, v in graph.probe_gemm_sizes.items() if len({s for s, _ in v}) > 1}
    assert shared
    steps = [s for s in analysed_steps(graph)]
    by_sizes: dict[frozenset, list[int]] = defaultdict(list)
    for o in graph.gpu_ops:
        if signature(o) in shared and any(s.gpu_start_ns <= o.start_ns < s.gpu_end_ns
                                          for s in steps):
            by_sizes[candidate_sizes(graph, o)].append(o.duration_ns)
    # every launch resolves to one problem, and the long ones are the vocabulary's
    assert all(len(k) == 1 for k in by_sizes)
    vocab = [d for k, ds in by_sizes.items() for d in ds if any(VOCAB in s for s in k)]
    other = [d for k, ds in by_sizes.items() for d in ds if not any(VOCAB in s for s in k)]
    assert vocab and other and min(vocab) > 4 * max(other)


def test_every_window_gemm_of_the_step_has_candidate_sizes(graph):
    steps = analysed_steps(graph)
    s = steps[0]
    gemms = [o for o in graph.gpu_ops if s.gpu_start_ns <= o.start_ns < s.gpu_end_ns
             and classify(o) is KernelCategory.GEMM]
    known = [o for o in gemms if candidate_sizes(graph, o)]
    assert len(known) / len(gemms) > 0.95, (len(known), len(gemms))
