"""The op graph's links (launch, stream, sync, contains) are consistent on a real step."""

from __future__ import annotations

import itertools
from collections import defaultdict

from advisor.engine.context import analysed_steps
from advisor.graph.syncs import waited_ops
from advisor.ingest.base import load_trace
from tests.conftest import SCENARIOS


def test_a_steps_calls_kernels_syncs_and_ranges_link_consistently():
    graph = load_trace(SCENARIOS / "host-sync" / "bad" / "nsys.sqlite.gz")
    step = analysed_steps(graph)[0]
    ops = graph.step_ops(step)
    calls = {}
    for op in ops:  # launch: the call that launched the op, by (pid, correlation)
        call = graph.launcher(op)
        assert call is not None
        assert (call.pid, call.correlation) == (op.pid, op.correlation)
        assert call.start_ns <= op.start_ns and op in graph.launched(call)
        calls[call.id] = call
    by_stream = defaultdict(list)
    for op in ops:
        by_stream[(op.device, op.stream)].append(op)
    for on_stream in by_stream.values():  # stream order is execution order
        for a, b in itertools.pairwise(sorted(on_stream, key=lambda o: o.start_ns)):
            assert a.end_ns <= b.start_ns + 1_000
    waits = waited_ops(graph, list(calls.values()))
    assert waits  # the scenario's step synchronizes
    for call, op in waits:  # sync: the waiting call ended after the op it waited for
        assert call.start_ns < op.end_ns <= call.end_ns + 2_000
    contained = [c for c in calls.values() if graph.ranges_at(c.pid, c.tid, c.start_ns)]
    assert contained  # contains: the step's calls sit inside its ranges
    for call in contained:
        inner = graph.ranges_at(call.pid, call.tid, call.start_ns)[-1]
        assert inner.start_ns <= call.start_ns <= inner.end_ns
