"""The what-if replay reproduces real traces unmodified, and its edits move time the right way."""

from __future__ import annotations

import pytest

from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.effects import CaptureGraph, DropOps, RemoveWaits, ScaleHostWork
from advisor.graph.queries import graphable_regions, steps_ops
from advisor.graph.syncs import host_waits
from advisor.ingest.base import load_trace
from tests.conftest import shared

REAL = [
    "kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto/tb_plugin_samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
]


@pytest.fixture(scope="module", params=REAL, ids=lambda p: p.split("/")[1])
def ctx(request) -> RuleContext:
    graph = load_trace(shared(request.param))
    steps = analysed_steps(graph)
    assert steps, "real training trace without steady steps"
    return RuleContext(graph, steps)


def test_unmodified_replay_reproduces_the_observed_steps(ctx: RuleContext):
    observed = ctx.step_ns
    assert abs(ctx.observed.mean_ns - observed) / observed < 0.03


def test_removing_profiler_overhead_only_shortens_the_host_side(ctx: RuleContext):
    assert ctx.baseline.median_ns <= ctx.observed.median_ns * 1.0001
    busy = sum(o.duration_ns for o in steps_ops(ctx.graph, ctx.steps)) / len(ctx.steps)
    assert ctx.baseline.median_ns >= 0.5 * busy


def test_removing_gpu_work_never_makes_the_step_slower(ctx: RuleContext):
    ops = steps_ops(ctx.graph, ctx.steps)
    half = tuple(o.id for o in ops[::2])
    assert ctx.replay([DropOps(half)]).mean_ns <= ctx.baseline.mean_ns * 1.0001


def test_removing_all_gpu_work_leaves_the_host_time(ctx: RuleContext):
    ops = steps_ops(ctx.graph, ctx.steps)
    after = ctx.replay([DropOps(tuple(o.id for o in ops))]).mean_ns
    assert after < ctx.baseline.mean_ns


def test_host_work_bounds_the_step_from_below(ctx: RuleContext):
    # Without host work between calls, the step can only get faster, never below zero.
    spans = tuple((s.cpu_start_ns, s.cpu_end_ns) for s in ctx.steps)
    after = ctx.replay([ScaleHostWork(spans, 0.0)]).mean_ns
    assert 0 < after <= ctx.baseline.mean_ns * 1.0001


def test_graph_capture_cannot_beat_the_gpu_busy_time(ctx: RuleContext):
    ops = steps_ops(ctx.graph, ctx.steps)
    waits = host_waits(ctx.graph)
    replay = ctx.replay([RemoveWaits(tuple(w.call.id for w in waits)),
                         CaptureGraph(tuple(graphable_regions(ctx.steps)))])
    busy_per_step = sum(o.duration_ns for o in ops) / len(ctx.steps)
    # kernels of one stream cannot overlap: a lower bound with one stream's share
    assert replay.mean_ns <= ctx.baseline.mean_ns * 1.0001
    assert replay.mean_ns >= 0.5 * busy_per_step


def test_a_removed_op_keeps_the_stream_order_a_sync_waited_for():
    """A host sync that waited for a tiny copy at the back of a long queue must still wait for
    the queue when the copy is removed (mfu_2gpu_before: 8-byte copies 9 ms behind the host)."""
    graph = load_trace(shared("nsys-ai/mfu_2gpu_before.sqlite"))
    ctx = RuleContext(graph, analysed_steps(graph))
    copies = [o for o in steps_ops(graph, ctx.steps) if o.kind.value == "memcpy"]
    assert copies
    speedup = ctx.speedup([DropOps(tuple(o.id for o in copies))])
    assert speedup < 1.02  # the copies and their dispatch go; the wait stays


def test_a_what_if_never_changes_the_template_it_forked_from(ctx: RuleContext):
    """What-ifs share the template's columns copy-on-write (issue #17): whatever one changes,
    the template, and every later what-if, replay as before."""
    before = ctx.simulation().run()
    template_cols = {f: list(getattr(ctx._template.columns(), f))
                     for f in ("dur", "gap", "wait_op", "overlap_from", "op_dur", "op_removed")}
    ops = steps_ops(ctx.graph, ctx.steps)
    sim = ctx.simulation()
    for effect in (DropOps(tuple(o.id for o in ops[::2])),
                   RemoveWaits(tuple(w.call.id for w in host_waits(ctx.graph))),
                   ScaleHostWork(tuple((s.cpu_start_ns, s.cpu_end_ns) for s in ctx.steps), 0.5),
                   CaptureGraph(tuple(graphable_regions(ctx.steps)))):
        effect.apply(sim)
    changed = sim.run()
    assert changed.periods != before.periods
    assert ctx.simulation().run() == before
    for f, col in template_cols.items():
        assert getattr(ctx._template.columns(), f) == col, f
