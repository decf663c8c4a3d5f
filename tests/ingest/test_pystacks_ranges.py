"""How samples become frame ranges and how the clock fit judges itself (`advisor.ingest.pystacks`),
on hand-written samples: the rules themselves, which the real-data tests in
test_pystacks_nsys.py exercise only as a whole."""

from __future__ import annotations

from advisor.graph.model import SAMPLED, RangeSource
from advisor.ingest.pystacks import MAX_RESIDUAL_NS, Samples, fit_clock, sample_ranges


def test_each_sample_stands_for_the_time_around_it():
    frames = [("train.py", 1, "<module>"), ("train.py", 10, "step"), ("train.py", 20, "get_batch")]
    s = Samples(times=[1000, 2000, 3000, 4000], stack_ids=[0, 1, 0, 2],
                stacks=[[0, 1], [0, 1, 2], [0]], frames=frames, interval_ns=1000)
    got = sorted((r.name, r.start_ns, r.end_ns) for r in sample_ranges(s, lambda t: t + 5, 7, 8, 100))
    assert got == [
        ("train.py(1): <module>", 1005, 4505),  # the first sample to half an interval past the last
        ("train.py(10): step", 1005, 3505),  # one call seen in three samples in a row
        ("train.py(20): get_batch", 1505, 2505),  # from halfway before to halfway after
    ]
    ranges = sample_ranges(s, lambda t: t, 7, 8, 100)
    assert {(r.pid, r.tid, r.source, r.domain) for r in ranges} == {(7, 8, RangeSource.PYTHON,
                                                                     SAMPLED)}
    assert sorted(r.id for r in ranges) == [100, 101, 102]


def test_a_call_seen_again_after_leaving_is_a_new_range():
    frames = [("m.py", 1, "loop"), ("m.py", 5, "work")]
    s = Samples([0, 10, 20], [1, 0, 1], [[0], [0, 1]], frames, 10)
    work = [(r.start_ns, r.end_ns) for r in sample_ranges(s, lambda t: t, 1, 1, 0)
            if r.name.endswith("work")]
    assert sorted(work) == [(0, 5), (15, 25)]


def test_the_fit_is_refused_when_the_clocks_do_not_line_up():
    steps = [(0, 30_000_000), (30_100_000, 58_000_000), (58_100_000, 90_000_000)]
    pairs = [(b, b + 7_000_000) for s in steps for b in s]  # one offset: a perfect line
    good = fit_clock(pairs)
    assert good.problem is None and round(good.slope, 9) == 1 and good.max_residual_ns < 1
    late = [*pairs[:2], (pairs[2][0], pairs[2][1] + 2 * MAX_RESIDUAL_NS), *pairs[3:]]
    assert "off the fitted line" in fit_clock(late).problem
    fast = [(x, int(x * 1.01)) for x, _ in pairs]
    assert "rates differ" in fit_clock(fast).problem
    one = fit_clock(pairs[:2])  # one step: an offset only (two points fit any line)
    assert one.slope == 1 and one.problem is None
    assert fit_clock([]) is None


def test_frames_always_seen_together_nest_outer_first():
    """runpy's ``_run_code`` and the script's ``main()`` called from ``<module>`` are in every
    sample together: equal start and end. The graph orders ranges by (start, -end) and keeps the
    given order on ties, so the outer frame must come first or it reads as the inner one's
    callee (``train.py <module> -> _run_code``)."""
    from advisor.graph.source_lines import _sweep

    frames = [("runpy.py", 80, "_run_code"), ("train.py", 1, "<module>"),
              ("train.py", 30, "main"), ("train.py", 10, "get_batch")]
    s = Samples([0, 10, 20, 30], [0, 1, 0, 0], [[0, 1, 2], [0, 1, 2, 3]], frames, 10)
    ranges = sample_ranges(s, lambda t: t, 1, 1, 0)
    order = sorted(ranges, key=lambda r: (r.start_ns, -r.end_ns))  # as `_attach` sorts them
    assert [r.name.split(": ")[1] for r in order] == ["_run_code", "<module>", "main",
                                                      "get_batch"]
    timeline = _sweep(ranges, -1)
    inner = {w.frame.function: w for w in timeline.where}
    assert set(inner) == {"main", "get_batch"}
    assert [c.frame.function for c in inner["get_batch"].path] == ["<module>", "main",
                                                                   "get_batch"]
    assert all(w.via == "" for w in timeline.where)
