"""The networkx view of the op graph carries every edge kind, linked consistently."""

from __future__ import annotations

from advisor.engine.context import analysed_steps
from advisor.ingest.base import load_trace
from tests.conftest import SCENARIOS


def test_networkx_view_of_a_step_links_calls_kernels_syncs_and_ranges():
    graph = load_trace(SCENARIOS / "host-sync" / "bad" / "nsys.sqlite.gz")
    step = analysed_steps(graph)[0]
    ops = graph.step_ops(step)
    g = graph.to_networkx(ops)
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"launch", "stream", "sync", "contains"}
    for u, v, d in g.edges(data=True):
        if d["kind"] == "launch":  # the call that launched the op, by (pid, correlation)
            call, op = g.nodes[u]["event"], g.nodes[v]["event"]
            assert (call.pid, call.correlation) == (op.pid, op.correlation)
            assert call.start_ns <= op.start_ns
        if d["kind"] == "stream":  # stream order is execution order
            a, b = g.nodes[u]["event"], g.nodes[v]["event"]
            assert (a.device, a.stream) == (b.device, b.stream) and a.start_ns <= b.start_ns
        if d["kind"] == "sync":  # the waiting call ended after the op it waited for
            op, call = g.nodes[u]["event"], g.nodes[v]["event"]
            assert call.start_ns < op.end_ns <= call.end_ns + 2_000
    assert sum(1 for n in g if n[0] == "gpu") == len(ops)
