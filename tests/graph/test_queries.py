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
