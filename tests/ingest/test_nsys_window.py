"""Choosing the detailed window of a long trace, on steps found in real exports."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.ingest.base import load_trace
from advisor.ingest.nsys.window import op_window, step_window, warmup_count

TRACES = Path(__file__).parents[2].parent / "shared" / "traces"

needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"real traces not found at {TRACES} (the shared/ folder)"
)


def fresh_steps(name: str):
    """The steps of a real trace, as the loader would see them before marking warm-up."""
    steps = load_trace(TRACES / name).steps
    for s in steps:
        s.warmup = False
    return steps


def test_warmup_is_the_first_step_and_leading_slow_ones():
    assert warmup_count([]) == 0
    assert warmup_count([5]) == 1
    assert warmup_count([100, 10, 11, 10, 12, 10]) == 1
    assert warmup_count([100, 50, 10, 11, 10, 12, 10]) == 2
    assert warmup_count([100, 50, 10, 10]) == 2
    assert warmup_count([100, 10, 50, 50]) == 1  # slow steps later on are not warm-up


@needs_traces
def test_short_step_lists_are_taken_whole():
    steps = fresh_steps("pipit/perlmutter-cloverleaf-cuda.sqlite")
    window = step_window(steps, max_steps=30)
    assert window.steps == sorted(steps, key=lambda s: s.cpu_start_ns)
    assert window.start_ns == steps[0].cpu_start_ns and window.end_ns == steps[-1].cpu_end_ns


@needs_traces
def test_long_step_lists_give_max_steps_after_a_lead_in():
    steps = sorted(fresh_steps("nsys-ai/mfu_2gpu_before.sqlite"), key=lambda s: s.cpu_start_ns)
    assert len(steps) >= 6
    window = step_window(steps, max_steps=3)
    assert len(window.steps) == 4  # the lead-in build_graph marks warm-up, then 3 steady
    assert window.steps[0] is not steps[0]  # the first step (warm-up) is skipped
    assert window.start_ns == window.steps[0].cpu_start_ns
    assert window.end_ns == window.steps[-1].cpu_end_ns
    assert "4 of" in window.description


def test_op_window_is_whole_when_small_and_mid_trace_when_large():
    assert op_window(10, 100, (0, 1000)).whole
    w = op_window(1000, 100, (0, 10_000))
    assert not w.whole
    assert (w.start_ns, w.end_ns) == (4500, 5500)
