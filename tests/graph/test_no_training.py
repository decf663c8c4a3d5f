"""A trace with PyTorch's operators and no backward pass or optimizer step says the advice is a
training step's. Real traces: TraceLens's H100 inference captures (a video classifier's
pipeline, BERT-small), a public training step (HTA's ns_resolution trace), our graphed fixed
steps (training, whose backward runs inside the CUDA graph replay)."""

from __future__ import annotations

import pytest

from advisor.analysis import analyze
from tests.conftest import SCENARIOS, shared

INFERENCE = ["tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz",
             "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"]


def _note(a) -> str | None:
    return next((w for w in a.warnings if "no backward pass or optimizer step" in w), None)


@pytest.mark.parametrize("rel", INFERENCE)
def test_an_inference_trace_says_the_advice_is_for_a_training_step(rel):
    note = _note(analyze(shared(rel)))
    assert note is not None and "written for a training step" in note


def test_a_training_trace_has_no_note():
    assert _note(analyze(shared(
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))) is None


@pytest.mark.parametrize("scenario", ["cpu-bound-loss", "uncaptured-cuda-graph"])
def test_a_graphed_training_step_has_no_note(scenario):
    """Its backward and optimizer run inside the replay: no operator of theirs is recorded."""
    a = analyze(SCENARIOS / scenario / "good" / "trace.json.gz")
    assert not any("Backward" in r.name for r in a.graph.ranges)
    assert _note(a) is None
