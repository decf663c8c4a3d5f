"""A loss computed after the model: its chains, and the fix compiler-fusion names for them.

On gemm-shape-alignment's fixed step (an LM with a 50,304-token vocabulary, the loss
``F.cross_entropy(logits.float(), y)`` after the model), compile of the model alone measured
1.078x on the H200 (tests/healthy_findings.py) where compiler-fusion promised 1.49x: most of its
chains are the loss's, which ``torch.compile(model)`` leaves eager. Real captures only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.graph.chains import find_chains
from advisor.graph.loss_chains import loss_kernels
from tests.test_false_findings import rename_ranges

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
GEMM_GOOD = ROOT / "scenarios" / "gemm-shape-alignment" / "good" / "trace.json.gz"


def _loss_share(path: Path, steps=None) -> tuple[float, float]:
    """(loss chains' time / all fusable chains' time, loss chains' time / the steps' time)."""
    a = analyze(path)
    steps = steps(a) if steps else a.context.steps
    chains = find_chains(a.graph, steps).fusable
    loss = sum(o.duration_ns for o in loss_kernels(a.graph, steps, chains))
    total = sum(o.duration_ns for c in chains for o in c)
    return loss / total, loss / sum(s.time_ns for s in steps)


def _fusion(path: Path):
    return next(f for f in analyze(path).results.findings if f.rule == "compiler-fusion")


def test_an_lm_loss_after_the_model_is_most_of_its_chains_and_the_fix_compiles_it():
    of_chains, of_step = _loss_share(GEMM_GOOD)
    assert 0.6 < of_chains < 0.9 and of_step > 0.3, (of_chains, of_step)
    f = _fusion(GEMM_GOOD)
    assert f.fix.mechanism == "eager-chains-and-loss"
    assert "def loss_fn" in f.fix.snippet and "the loss, computed after the model" in f.message
    assert f.evidence.quantities["loss_chain_ns_per_step"] > 5e6


@pytest.mark.parametrize("path", [ROOT / "public" / "hf-gpt2" / "trace.json.gz",
                                  ROOT / "public" / "hf-gpt2" / "nsys.sqlite.gz"])
def test_a_loss_inside_the_model_is_not_the_loss_s(path: Path):
    """HF models compute the loss inside forward (labels=...): torch.compile covers it. The
    Trainer's loss span only scales the loss (a kernel of a few µs), and the cross-entropy
    gradient autograd runs first in backward is the model's: not the loss span's."""
    assert _loss_share(path)[1] < 1e-4
    assert _fusion(path).fix.mechanism == "eager-chains"


def test_a_small_loss_after_the_model_keeps_the_plain_fix():
    """timm's ImageNet loss after the model is a sliver of the step: the fix stays the model's."""
    _, of_step = _loss_share(ROOT / "public" / "timm-vit-b" / "trace.json.gz")
    assert 0 < of_step < 0.02, of_step
    assert _fusion(ROOT / "public" / "timm-vit-b" / "trace.json.gz").fix.mechanism == "eager-chains"


def test_without_a_loss_mark_nothing_is_the_loss_s(tmp_path):
    renamed = rename_ranges(GEMM_GOOD, tmp_path, "loss", "forward")
    assert _loss_share(renamed)[0] == 0.0
    assert _fusion(renamed).fix.mechanism == "eager-chains"


def test_a_chain_that_begins_before_the_loss_span_is_split_by_where_each_kernel_ran():
    """The loss's chain on the stream starts with kernels launched in ``loss`` and runs on into
    its gradient: were the span's first launch outside it (a memory-bound op at the end of
    forward), the rest of the loss must still be the loss's (each kernel by its launch)."""
    def later_loss(a):
        steps = a.context.steps
        first = min(call.start_ns for s in steps for lo, hi in s.phases["loss"]
                    for call in a.graph.api_calls_in(s.pid, s.tid, lo, hi))
        shift = first - steps[0].phases["loss"][0][0] + 1  # past the first launch
        return [dataclasses.replace(s, phases={**s.phases, "loss": [(lo + shift, hi) for lo, hi
                                                                    in s.phases["loss"]]})
                for s in steps]

    whole, _ = _loss_share(GEMM_GOOD)
    cut, _ = _loss_share(GEMM_GOOD, later_loss)
    assert 0.5 * whole < cut < whole, (cut, whole)


def test_the_loss_fix_is_named_by_what_fusing_the_loss_saves_not_by_its_time():
    """fp8-candidate's check MLP computes ``F.mse_loss(out.float(), y)`` after the model: its
    chains take 2.5% of the step, but fusion keeps each chain's largest kernel and half of the
    second, so compiling the loss would save 1.7%, under the 2% a finding needs (compile of the
    model measured 0.984x there: tests/healthy_findings.py). The gemm-shape-alignment LM's loss
    saves a quarter of its step: the loss's fix."""
    from advisor.rules.compiler_fusion import fusion_saving_ns

    path = ROOT / "scenarios-check" / "fp8-candidate" / "good" / "trace.json.gz"
    a = analyze(path)
    steps = a.context.steps
    chains = find_chains(a.graph, steps).fusable
    loss = loss_kernels(a.graph, steps, chains)
    step = sum(s.time_ns for s in steps)
    assert sum(o.duration_ns for o in loss) / step > 0.02
    assert fusion_saving_ns(chains, loss) / step < 0.02
    assert _fusion(path).fix.mechanism == "eager-chains"
    q = _fusion(GEMM_GOOD).evidence.quantities
    assert q["loss_fusion_saving_ns_per_step"] > 0.4 * q["loss_chain_ns_per_step"]


def test_fusion_saves_nothing_of_a_chain_s_largest_kernel():
    """The fused kernel still moves the largest member's traffic: a loss kernel that is its
    chain's largest saves nothing; the second largest saves 1 - SECOND_KEPT of itself."""
    from advisor.rules.compiler_fusion import SECOND_KEPT, fusion_saving_ns

    from advisor.graph.model import GpuOp, GpuOpKind

    def op(i: int, ns: int) -> GpuOp:
        return GpuOp(i, GpuOpKind.KERNEL, f"k{i}", 0, ns, 0, 7, 1, i)

    chain = [op(1, 100), op(2, 60), op(3, 10)]
    assert fusion_saving_ns([chain], [chain[0]]) == 0
    assert fusion_saving_ns([chain], [chain[1]]) == pytest.approx(60 * (1 - SECOND_KEPT))
    assert fusion_saving_ns([chain], chain) == pytest.approx(60 * (1 - SECOND_KEPT) + 10)


def test_every_framework_s_loss_fix_pastes():
    """The loss's fix exists for each framework the plain fix covers, and each snippet is
    Python that parses (the other rules' snippets keep ``...`` placeholders and templates)."""
    import ast

    from advisor.rules.compiler_fusion import CompilerFusion

    by_mech: dict[str, set[str]] = {}
    for v in CompilerFusion.fixes:
        ast.parse(v.snippet)
        by_mech.setdefault(v.mechanism, set()).add(v.framework)
    assert by_mech["eager-chains-and-loss"] >= by_mech["eager-chains"], by_mech
