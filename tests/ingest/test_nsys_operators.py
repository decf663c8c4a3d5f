"""PyTorch's operator ranges in an nsys export are read as operators (issue 37, item 2).

nanoGPT GPT-2 124M on the H100 under ``advisor profile --nsys``, once as advisor records it
today and once with ``--pytorch=autograd-nvtx`` added
(fixtures/public/nanogpt/wave4-nsys-flags/README.md): with the operator ranges the export says
what torch.profiler says about the step's operators (phases by their content, operator names,
the autograd links of the backward), and the estimates stay those of the export without them.
"""

from __future__ import annotations

from functools import cache

from advisor.analysis import analyze
from advisor.engine.profiler_cost import detect
from advisor.graph.model import RangeSource
from advisor.graph.op_names import EVALUATE_FUNCTION
from tests.conftest import ROOT

FLAGS = ROOT / "fixtures" / "public" / "nanogpt" / "wave4-nsys-flags"
AUTOGRAD = FLAGS / "gpt2-autograd.sqlite.gz"
DEFAULT = FLAGS / "gpt2-default.sqlite.gz"
COMPILED_SPEEDUP = 47.27 / 36.98
"""torch.compile on this job, from nanoGPT's own log (iterations 20-149, mean ms per iteration:
plain.log.gz 47.27, compiled.log.gz 36.98)."""


@cache
def _analysis(path):
    return analyze(path)


def _compile_estimate(path) -> float:
    found = [f for f in _analysis(path).results.findings if f.rule == "compiler-fusion"]
    assert found, path
    return found[0].estimate.speedup


def test_the_operator_ranges_are_operators_named_without_their_counters():
    graph = _analysis(AUTOGRAD).graph
    ops = [r for r in graph.ranges if r.source is RangeSource.OPERATOR]
    assert len(ops) > 10_000
    assert not [r for r in ops if "op_id" in r.name or "seq =" in r.name]
    assert {"aten::linear", "aten::layer_norm", "aten::scaled_dot_product_attention"} <= {
        r.name for r in ops}
    # CUB's own ranges (domain "CCCL") name library calls, not operators
    cub = [r for r in graph.ranges if r.name.startswith("cub::")]
    assert cub and all(r.source is RangeSource.NVTX and r.domain == "CCCL" for r in cub)


def test_the_backward_nodes_are_joined_to_their_forward_sequence_numbers():
    graph = _analysis(AUTOGRAD).graph
    engine = [r for r in graph.ranges if r.name.startswith(EVALUATE_FUNCTION)]
    numbered = [r for r in engine if r.sequence >= 0 and r.fwd_thread > 0]
    assert engine and len(numbered) > 0.8 * len(engine)
    forward = {r.sequence for r in graph.ranges if r.fwd_thread == 0 and r.sequence >= 0}
    assert sum(1 for r in numbered if r.sequence in forward) > 0.8 * len(numbered)


def test_phases_are_named_by_the_operators_they_run():
    notes = " ".join(_analysis(AUTOGRAD).graph.info.notes)
    assert "aten::pin_memory" in notes  # the batch's preparation, as torch.profiler tells it
    assert "aten::" not in " ".join(_analysis(DEFAULT).graph.info.notes)


def test_the_profiler_cost_says_the_operator_ranges_were_not_measured():
    cal = detect(_analysis(AUTOGRAD).graph)
    assert cal.config.endswith(",autograd-nvtx") and "not measured" in cal.measured
    assert "autograd-nvtx" not in detect(_analysis(DEFAULT).graph).config


def test_compiler_fusion_is_the_same_with_and_without_the_operator_ranges():
    with_ops, without = _compile_estimate(AUTOGRAD), _compile_estimate(DEFAULT)
    assert max(with_ops, without) / min(with_ops, without) < 1.05
    assert max(with_ops, COMPILED_SPEEDUP) / min(with_ops, COMPILED_SPEEDUP) <= 1.2
