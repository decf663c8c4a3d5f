"""A loss computed after the model: its chains, and the fix compiler-fusion names for them.

On gemm-shape-alignment's fixed step (an LM with a 50,304-token vocabulary, the loss
``F.cross_entropy(logits.float(), y)`` after the model), compile of the model alone measured
1.078x on the H200 (tests/healthy_findings.py) where compiler-fusion promised 1.49x: most of its
chains are the loss's, which ``torch.compile(model)`` leaves eager. Real captures only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.graph.chains import find_chains
from advisor.graph.loss_chains import loss_chains
from tests.test_false_findings import rename_ranges

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
GEMM_GOOD = ROOT / "scenarios" / "gemm-shape-alignment" / "good" / "trace.json.gz"


def _loss_share(path: Path) -> tuple[float, float]:
    """(loss chains' time / all fusable chains' time, loss chains' time / the steps' time)."""
    a = analyze(path)
    steps = a.context.steps
    chains = find_chains(a.graph, steps).fusable
    loss = sum(o.duration_ns for c in loss_chains(a.graph, steps, chains) for o in c)
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
    """HF models compute the loss inside forward (labels=...): torch.compile covers it."""
    assert _loss_share(path)[0] == 0.0
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
