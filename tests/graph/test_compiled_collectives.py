"""Collectives that autograd's hooks fire inside a compiled range stay out of its CUDA graph.

HTA's df_index_resolver trace (V100, torch.compile, rank 1 of 2): no ``## Call CompiledFxGraph``
ranges (an older torch, or a backend other than Inductor), so AOTAutograd's ``CompiledFunction``
(forward) and ``CompiledFunctionBackward`` stand for the compiled graphs. Inside the backward's
range a gradient hook clones each gradient and all-reduces it, 404 ``nccl:all_reduce`` a step
over its last 130 ms, paced by the host.
reduce-overhead records the compiled graphs, not the hooks: those collectives, with the host
work between them, keep their launches in the replay (`queries.compiled_capture`).
"""

from __future__ import annotations

import pytest

from advisor.analysis import analyze_graph
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.effects import CaptureGraph
from advisor.graph.collectives import host_collective, is_communication
from advisor.graph.intervals import merge
from advisor.graph.queries import _around, compiled_capture, compiled_regions, within
from advisor.ingest.base import load_trace
from tests.conftest import shared

TRACE = "hta/df_index_resolver/df_index_resolver.json.gz"
GRAPH = "uncaptured-cuda-graph"


@pytest.fixture(scope="module")
def df_trace():
    graph = load_trace(shared(TRACE))
    return graph, analysed_steps(graph)


def _comm_launches(graph, steps):
    pid = steps[0].pid
    return [c for s in steps for c in graph.calls_overlapping(pid, s.cpu_start_ns, s.cpu_end_ns)
            if c.start_ns >= s.cpu_start_ns and any(is_communication(o) for o in graph.launched(c))]


def _ranges(graph, steps, test):
    pid = steps[0].pid
    return [r for s in steps for p, tid in graph.range_threads if p == pid
            for r in graph.ranges_in(pid, tid, s.cpu_start_ns, s.cpu_end_ns) if test(r.name)]


def test_hook_collectives_nested_in_the_compiled_backward_are_not_captured(df_trace):
    graph, steps = df_trace
    regions, hooked = compiled_capture(graph, steps)
    captured = within(regions)
    launches = _comm_launches(graph, steps)
    backward = _ranges(graph, steps, lambda n: n == "CompiledFunctionBackward")
    assert len(launches) >= 100 * len(steps)
    assert all(any(r.start_ns <= c.start_ns < r.end_ns for r in backward) for c in launches), \
        "the trace's all-reduces are nested in the compiled backward's range"
    assert not any(captured(c.start_ns) for c in launches)
    collectives = _ranges(graph, steps, lambda n: host_collective(n) is not None)
    assert collectives and not any(captured(r.start_ns) for r in collectives)
    assert len(hooked) >= 100 * len(steps)  # one span a collective (its ranges and launch)
    # what is the compiled graphs' stays: the forward whole, the backward up to the hooks
    for r in _ranges(graph, steps, lambda n: n == "CompiledFunction"):
        assert any(a <= r.start_ns and r.end_ns <= b for a, b in regions)
    for r in backward:
        first = min(c.start_ns for c in launches if r.start_ns <= c.start_ns < r.end_ns)
        assert any(a == r.start_ns and first - 1_000_000 <= b <= first for a, b in regions)
        covered = sum(min(b, r.end_ns) - max(a, r.start_ns) for a, b in regions
                      if a < r.end_ns and b > r.start_ns)
        assert covered < 0.6 * (r.end_ns - r.start_ns)  # 113 of its 243 ms


def test_the_rule_replays_the_hook_collectives_eagerly(df_trace):
    graph, steps = df_trace
    found = [f for f in analyze_graph(graph, rule_names=[GRAPH]).results.findings
             if f.rule == GRAPH]
    assert found
    f = found[0]
    assert f.evidence.quantities["eager_collectives_per_step"] >= 100
    for effects in (f.effects, f.low_effects, f.high_effects):
        for e in effects:
            if isinstance(e, CaptureGraph):
                captured = within(e.intervals)
                assert not any(captured(c.start_ns) for c in _comm_launches(graph, steps))
    # The replay keeps the hooks' cost: the backward alone, captured up to its hooks, gains
    # less than the whole range captured (collectives and hook work made one graph launch).
    ctx = RuleContext(graph, steps)
    backward = merge((r.start_ns, r.end_ns) for r in
                     _ranges(graph, steps, lambda n: n == "CompiledFunctionBackward"))
    cut = [(a, b) for a, b in compiled_regions(graph, steps)
           if any(x <= a < y for x, y in backward)]
    whole = ctx.speedup([CaptureGraph(tuple(backward))])
    kept = ctx.speedup([CaptureGraph(tuple(cut))])
    assert kept < whole - 0.15, (kept, whole)


def test_a_compiled_call_between_hook_collectives_stays_captured():
    """`_around`: the stretch from the first to the last collective is eager, but a compiled
    range of its own between two of them (a graph of its own) is captured; before and after
    the stretch the region is the graph's."""
    eager = [(30, 35), (50, 55), (80, 85)]
    calls = [(0, 100), (60, 75), (40, 52)]  # the region; a graph between two; one overlapping
    assert _around(0, 100, eager, calls) == [(0, 30), (60, 75), (85, 100)]
    assert _around(30, 85, eager, [(30, 85)]) == []  # all of it hooks


def _graph(names_spans):
    from advisor.graph.model import CpuRange, OpGraph, RangeSource, Step, TraceInfo

    ranges = [CpuRange(i, name, a, b, 1, 2, RangeSource.ANNOTATION)
              for i, (name, a, b) in enumerate(names_spans)]
    ranges.append(CpuRange(len(ranges), "ProfilerStep#1", 0, 200, 1, 1, RangeSource.ANNOTATION))
    step = Step(1, "ProfilerStep#1", 1, 1, 0, 200)
    return OpGraph(TraceInfo("synthetic", "kineto-json"), ranges, [], [], [], [step]), [step]


def test_collectives_the_compiled_graph_calls_itself_are_captured_with_it():
    """A functional collective (``_c10d_functional::all_reduce_``, what Inductor emits) is the
    graph's own; a ``c10d::allreduce_`` a hook fires is not; inside a compiled FX graph's call
    every collective is the graph's."""
    graph, steps = _graph([("CompiledFunctionBackward", 10, 100),
                           ("_c10d_functional::all_reduce_", 40, 50), ("nccl:all_reduce", 41, 49),
                           ("c10d::allreduce_", 70, 80), ("nccl:all_reduce", 71, 79)])
    assert compiled_capture(graph, steps) == ([(10, 70), (80, 100)], [(70, 80)])
    graph, steps = _graph([("## Call CompiledFxGraph abc ##", 10, 100),
                           ("c10d::allreduce_", 70, 80), ("nccl:all_reduce", 71, 79)])
    assert compiled_capture(graph, steps) == ([(10, 100)], [])
