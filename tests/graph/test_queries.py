"""`queries.within` answers exactly what `queries.inside` does, for any spans."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from advisor.graph.queries import inside, within

spans = st.lists(st.tuples(st.integers(-50, 300), st.integers(-60, 320)), max_size=12)


@given(spans, st.lists(st.integers(-80, 350), max_size=60))
def test_within_is_inside_for_unsorted_overlapping_and_empty_spans(spans, instants):
    test = within(spans)
    for t in instants:
        assert test(t) == inside(t, spans)


def test_compiled_regions_are_the_compiled_graph_calls_of_both_passes():
    """What torch.compile's reduce-overhead mode would record as CUDA graphs on a real compiled
    step (the planted GPT with torchao float8 under compile, H100): the calls of the compiled FX
    graphs, forward on the loop's thread and backward on autograd's, inside the steps, and not
    the eager code around them."""
    from advisor.engine.context import analysed_steps
    from advisor.graph.queries import compiled_regions
    from advisor.ingest.base import load_trace
    from tests.conftest import ROOT

    graph = load_trace(ROOT / "fixtures/public/planted-gpt-routes/trace_wide-fp8-compile.json.gz")
    steps = analysed_steps(graph)
    regions = compiled_regions(graph, steps)
    calls = [r for r in graph.ranges if r.name.startswith("## Call CompiledFxGraph")
             and any(s.cpu_start_ns <= r.start_ns < s.cpu_end_ns for s in steps)]
    assert len(regions) == len(calls) == 2 * len(steps)  # one forward, one backward a step
    assert len({r.tid for r in calls}) == 2
    covered = sum(b - a for a, b in regions)
    assert 0 < covered < sum(s.cpu_ns for s in steps)
    # an eager step has none
    eager = load_trace(ROOT / "fixtures/public/planted-gpt-routes/trace.json.gz")
    assert compiled_regions(eager, analysed_steps(eager)) == []
