"""Phases named by the code that runs in them (issue 33, item 1), on H100 captures.

nanoGPT's ``train.py`` fetches the next batch (``get_batch``: memmap slicing, ``torch.stack``,
``pin_memory().to(non_blocking=True)``) between its forward and its backward, where
`advisor profile`'s hooks cut a phase named ``loss``. advisor then raised cpu-bound-loss
(3.23x on the nsys capture of ``train_shakespeare_char.py``, "vectorize the per-sample loss
loop") for a loop that does not exist. The real per-sample loss loop (the cpu-bound-loss
scenario) must keep its loss phase and its finding.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from advisor.analysis import Analysis, analyze
from advisor.engine.context import analysed_steps
from advisor.ingest.base import load_trace
from tests.archive import readable

ROOT = Path(__file__).resolve().parents[2]
NANOGPT_STACKS = ROOT / "fixtures/source-lines/traces/nanogpt/trace_rank0.json.gz"
NANOGPT_NSYS = ROOT / "fixtures/archive/unprofiled/h100-2026-11-23b/nanogpt-nsys/nsys_rank0.sqlite.gz"
LOSS_LOOP = ROOT / "fixtures/source-lines/traces/cpu-bound-loss/trace_rank0.json.gz"


@cache
def _analysis(path: Path) -> Analysis:
    return analyze(readable(path))


def _rules(a: Analysis) -> dict[str, object]:
    return {f.rule: f for f in a.results.findings}


def test_nanogpt_get_batch_is_the_data_phase_with_its_line():
    """With Python stacks: the span between forward and backward is 80% ``get_batch`` and holds
    no loss operator (nanoGPT computes its loss inside ``GPT.forward``): it is the data phase,
    named by the function and its line, and no cpu-bound-loss is raised."""
    a = _analysis(NANOGPT_STACKS)
    steps = analysed_steps(a.graph)
    assert steps and all("data" in s.phases and "loss" not in s.phases for s in steps)
    note = next(n for n in a.graph.info.notes if "named 'data'" in n)
    assert "train.py:116 get_batch" in note
    assert "cpu-bound-loss" not in _rules(a)
    parts = [p for p in a.source.phases if p.phase == "data" and p.frame is not None]
    top = max(parts, key=lambda p: p.ns_per_step)
    assert (top.frame.file, top.frame.line, top.frame.function) == ("train.py", 116, "get_batch")


def test_nanogpt_nsys_batch_upload_is_data_preparation_for_the_loader_rule():
    """Without operator ranges (nsys): the span's GPU work is the batch's two host-to-device
    copies and one kernel (``loss / gradient_accumulation_steps``), no sync. It is the data
    phase; loader-jitter names the training thread's loading, and the idle table says data."""
    a = _analysis(NANOGPT_NSYS)
    rules = _rules(a)
    assert "cpu-bound-loss" not in rules  # was 3.23x, the top finding
    loader = rules["loader-jitter"]
    assert loader.fix.mechanism == "main-thread-loading"
    assert "off the training thread" in loader.fix.title
    assert "non_blocking" in loader.fix.snippet and "Thread" in loader.fix.snippet
    steps = analysed_steps(a.graph)
    assert all(set(s.phases) == {"data", "forward", "backward", "optimizer"} for s in steps)
    causes = a.summary.idle_cause_medians_ns()
    assert causes.get("data", 0) > 1e6 and "loss" not in causes


def test_a_real_per_sample_loss_loop_keeps_its_loss_phase_and_finding():
    """The cpu-bound-loss scenario's ``loss_loop`` (per-sample Python, ``.item()`` per sample)
    is loss code: its phase stays ``loss`` and the rule still fires."""
    a = _analysis(LOSS_LOOP)
    steps = analysed_steps(a.graph)
    assert all("loss" in s.phases and "data" not in s.phases for s in steps)
    assert not [n for n in a.graph.info.notes if "named 'data'" in n]
    assert "cpu-bound-loss" in _rules(a)


@pytest.mark.parametrize("trace", [
    "fixtures/source-lines/traces/nanogpt-nostack/trace_rank0.json.gz",
    "fixtures/public/nanogpt/trace.json.gz",
    "fixtures/public/nanogpt/nsys.sqlite.gz",
])
def test_nanogpt_without_stacks_is_renamed_from_its_operators_or_copies(trace):
    """Without Python frames the operators say it (``aten::stack``, ``pin_memory``, the
    batch's ``aten::to`` uploading host memory; the rest of the span is untraced numpy);
    without operators, the host-to-device copies."""
    graph = load_trace(ROOT / trace)
    note = next(n for n in graph.info.notes if "named 'data'" in n)
    assert "aten::stack" in note or "host-to-device copies" in note
    assert all("loss" not in s.phases for s in graph.steps)


@pytest.mark.parametrize("trace", [
    "fixtures/source-lines/traces/host-sync/trace_rank0.json.gz",  # numpy over logged values
    "fixtures/scenarios/cpu-bound-loss/bad/nsys.sqlite.gz",
    "fixtures/scenarios/cpu-bound-loss/bad/trace.json.gz",
    "fixtures/scenarios/pageable-memcpy/bad/trace.json.gz",
    "fixtures/scenarios/loader-jitter/bad/nsys.sqlite.gz",
])
def test_loss_phases_that_fetch_no_batch_keep_their_name(trace):
    """Host work that fetches no batch (the host-sync scenario's ``metrics``: numpy percentiles
    of values read back) and the real losses of the scenarios stay ``loss``."""
    graph = load_trace(ROOT / trace)
    assert not [n for n in graph.info.notes if "named 'data'" in n]
    assert any("loss" in s.phases for s in graph.steps)


def test_a_frameworks_frame_that_passes_the_loss_along_is_no_loss_code():
    """The tiny Lightning run (H100, `advisor profile`, stacks) marks no loss phase; the loss
    was found from every range naming the loss, from ``aten::cross_entropy_loss`` to
    Lightning's ``automatic.py _clone_loss`` after ``training_step`` returned: 3 ms of
    Lightning's own host work called a per-sample loss loop (cpu-bound-loss 1.95x). Only loss
    code counts: the launch-bound step is uncaptured-cuda-graph's."""
    a = _analysis(ROOT / "fixtures/archive/unprofiled/h100-2026-11-23d/run3/fw-lightning-kineto/"
                         "trace_rank0.json.gz")
    rules = _rules(a)
    assert "cpu-bound-loss" not in rules and "uncaptured-cuda-graph" in rules
