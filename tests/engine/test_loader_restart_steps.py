"""Loader restarts are the run's structure, not jitter, nor a noisy host (issue 33).

fixtures/public/loader-imagenet-restarts: pytorch/examples' ImageNet ``main.py`` (ResNet-50,
batch 256, 4 workers without ``persistent_workers``, 21-iteration epochs and a validation pass
each) under `advisor profile` on the H100. The window (steps 17-26) holds the first epoch
boundary: step 20 starts the validation loader, validates, saves and restarts the training
loader (1821.85 ms traced); step 24 waits 138 ms while the fresh workers refill their queue.
The script's own logs: the settled step is 143 ms at 4, 8 and 15 workers, and more workers make
the run slower (README there). So these steps are `loader-restarts` (RUN001, whose estimate
``persistent_workers`` measured at 1.02x), and `loader-jitter` must not read them as outliers
to preallocate away (it said 1.70x), nor the measured baseline as a host too noisy to measure
on (it said so from the one epoch start outside the window, step 41).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from advisor.analysis import analyze_graph, analyze_input
from advisor.capture.baseline import measured_inputs, noisy_host
from advisor.capture.reporting import recorded_inputs
from advisor.capture.steptimes import StepClock, measured_step, structural
from advisor.engine.context import analysed_steps
from advisor.engine.host import HostFacts
from advisor.engine.loader_starts import restart_steps, start_steps
from advisor.ingest.base import load_trace
from tests.conftest import ROOT

RUN = ROOT / "fixtures" / "public" / "loader-imagenet-restarts"
TRACE = RUN / "trace.json.gz"


@cache
def _state() -> dict:
    return json.loads((RUN / "capture.json").read_text())


@cache
def _graph():
    return load_trace(TRACE)


def test_the_trace_shows_where_a_loader_started_and_how_deep_its_queue_is():
    """The Python ranges of ``DataLoader.__iter__`` put the start in step 20 only, and the
    indices the new iterator primed (``_try_put_index``) give its queue: 4 workers x 2."""
    graph = _graph()
    steps = analysed_steps(graph)
    assert start_steps(graph, steps) == {20: 8}
    explained = restart_steps(graph, steps)
    assert {20, 24} <= explained  # the start and the refill step that waited for its batch
    assert not explained & {18, 19}


def test_the_session_and_the_trace_agree_on_the_starts():
    facts = HostFacts.from_state(_state())
    assert facts.loader_start_steps == (-1, 20, 41)
    steps = analysed_steps(_graph())
    explained = restart_steps(_graph(), steps, facts.loader_start_steps, 8)
    assert explained & {s.index for s in steps} == set(range(20, 27))
    assert {41, 49} <= explained  # the start outside the window, and its 8-step refill


@pytest.fixture(scope="module")
def profiled():
    """The run analysed as `advisor profile` analyses it: trace, host facts, measured baseline."""
    state = _state()
    inputs = recorded_inputs(Path(TRACE), state["recorded"], facts=HostFacts.from_state(state))
    return analyze_input(measured_inputs(inputs, StepClock.from_state(state)))


def test_restarts_are_the_whole_run_finding_and_not_jitter(profiled):
    rules = {f.rule for f in profiled.results.findings}
    assert "loader-restarts" in rules
    assert "loader-jitter" not in rules


def test_a_bare_trace_does_not_call_the_epoch_boundary_jitter():
    """Without the session the trace's own ranges say where the loader started."""
    found = analyze_graph(_graph(), rule_names=["loader-jitter"]).results.findings
    assert [f for f in found if f.rule == "loader-jitter"] == []


def test_the_epoch_start_is_not_host_noise(profiled):
    assert not any(w.startswith("host too noisy") for w in profiled.warnings)
    clock = StepClock.from_state(_state())
    measured = measured_step(clock)
    assert measured is not None and 41 in measured.steps  # still in the mean the run pays
    assert noisy_host(measured, 144.47e6) is None
    # nor the input pipeline's bursts: the one slow step is the restart (RUN001 names it)
    assert measured.burst_cause == ""


def test_the_same_steps_without_their_structure_are_noise():
    """The check still works: with the epoch start's timed loader start, evaluation and
    checkpoint taken out of the record, step 41's 480 ms left over its data wait is noise."""
    state = json.loads(json.dumps(_state()))
    act = state["activity"]["41"]
    assert structural(act)
    for k in ("loader_start_calls", "loader_restart_calls", "eval", "checkpoint_calls"):
        act.pop(k)
    measured = measured_step(StepClock.from_state(state))
    assert measured is not None
    assert noisy_host(measured, 144.47e6) is not None


def test_jitter_away_from_a_loader_start_is_still_raised():
    """The scenario's allocation churn (fixtures/scenarios/loader-jitter/bad) with a loader
    start said to fall in its first churning step: that step and the next leave the evidence,
    the churn in the others is still the finding."""
    graph = load_trace(ROOT / "fixtures" / "scenarios" / "loader-jitter" / "bad" / "trace.json.gz")
    plain = [f for f in analyze_graph(graph, rule_names=["loader-jitter"]).results.findings
             if f.rule == "loader-jitter"]
    assert plain
    first = plain[0].evidence.steps[0]
    facts = HostFacts(loader_start_steps=(first,))
    found = [f for f in analyze_graph(graph, rule_names=["loader-jitter"],
                                      facts=facts).results.findings if f.rule == "loader-jitter"]
    assert found and found[0].fix.mechanism == plain[0].fix.mechanism
    assert first not in found[0].evidence.steps and first + 1 not in found[0].evidence.steps
    assert set(found[0].evidence.steps) == set(plain[0].evidence.steps) - {first, first + 1}
