"""No estimate goes below the step's floors, and fixes combine along a path (issue #34).

On real H100 captures: every finding's estimate and the combined one stay at or above the
floors the what-if leaves (the GPU's busy time of the kernels that stay, the host's own time
that stays, the loader's supply); the loader fix and CUDA graphs together, the combination
issue #34 saw promised at 19.6x, are held at the loader's production time per batch; and a
conditional finding combines only right after the finding it depends on.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from advisor.analysis import Analysis, analyze
from advisor.engine.combine import order
from advisor.engine.effects import BatchSupply, CaptureGraph, RemoveWaits, merge
from advisor.graph.queries import graphable_regions
from advisor.graph.syncs import host_waits
from tests.archive import readable

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
LOADER = "public/loader-imagenet/nsys.sqlite.gz"
CONDITIONAL = "archive/unprofiled/h100-2026-11-23/res/timm-nsys/nsys_rank0.sqlite.gz"
TRACES = [
    LOADER,
    CONDITIONAL,
    "public/loader-imagenet/trace.json.gz",
    "scenarios/unfused-attention/bad/nsys.sqlite.gz",
    "scenarios-check/unfused-attention/bad/trace.json.gz",
    "scenarios/fp32-matmul/bad/trace.json.gz",
    "scenarios/cpu-bound-loss/bad/nsys.sqlite.gz",
    "scenarios/pageable-memcpy/bad/nsys.sqlite.gz",
    "scenarios/loader-jitter/bad/nsys.sqlite.gz",
    "archive/unprofiled/h100-2026-11-23d/run1/cpu-bound-loss-kineto/trace_rank0.json.gz",
]


@lru_cache(maxsize=2)
def _analysis(rel: str) -> Analysis:
    return analyze(readable(ROOT / rel))


def _most(a: Analysis, effects, basis: str) -> float:
    """The largest speedup the floors after ``effects`` allow (measured here), on ``basis``:
    the step before over the highest floor, both over the steps the basis rests on."""
    ctx = a.context
    floor = ctx.floors(merge(list(effects)), basis).ns
    assert floor > 0
    steps = ctx.steps_for(basis)
    periods = ctx.baseline.periods if steps is None else [ctx.baseline.periods[k] for k in steps]
    return sum(periods) / len(periods) / floor


@pytest.mark.parametrize("rel", TRACES)
def test_no_estimate_goes_below_the_step_floors(rel: str):
    a = _analysis(rel)
    r = a.results
    assert r.findings and r.combined is not None
    for f in r.findings:
        e = f.estimate
        if f.conditional_on:  # its gain is on the step after its primary's fix
            primary = next(p for p in r.findings if p.rule == f.conditional_on)
            both = [*primary.effects, *f.effects]
            assert primary.estimate.speedup * e.speedup <= _most(a, both, e.basis) * (1 + 1e-9)
        else:
            assert e.speedup <= _most(a, f.effects, e.basis) * (1 + 1e-9), (rel, f.rule)
    c = r.combined
    effects = [e for f in order(r.findings) for e in f.effects]
    assert c.speedup <= _most(a, effects, c.basis) * (1 + 1e-9)  # never above step / floor
    floor = a.context.floor_step_ns(a.context.floors(merge(effects), c.basis).binding, c.basis)
    assert c.floor is not None and c.floor.ns == pytest.approx(floor)
    assert c.predicted_step_ns >= floor * (1 - 1e-9)


def test_the_loader_floor_holds_the_loader_fix_and_graphs_together():
    """The loader fix (7 workers) then CUDA graphs without the step's syncs, on the real
    ImageNet loader capture: the replay alone goes below the loader's production time per batch
    over 7 workers, and the estimate stays at it (64.5 ms was measured at ``-j 7``, with the
    syncs still in). Remove the floors and this fails."""
    a = _analysis(LOADER)
    ctx = a.context
    loader = next(f for f in a.results.findings if f.rule == "loader-jitter")
    supply = next(e for e in loader.effects if isinstance(e, BatchSupply))
    assert supply.workers == 7  # the 8 cores a bare trace assumes, one left to the training thread
    effects = merge([*loader.effects, RemoveWaits(tuple(w.call.id for w in host_waits(ctx.graph))),
                     CaptureGraph(tuple(graphable_regions(ctx.steps)))])
    replayed = ctx.replay(effects).mean_ns
    floor, binds = ctx.bound_by(effects)
    assert floor is not None and floor.kind == "loader" and binds
    assert replayed < 0.9 * supply.floor_ns
    _, after = ctx.before_after(effects, "mean")
    assert after == pytest.approx(supply.floor_ns)
    assert floor.ns == pytest.approx(ctx.floor_step_ns(ctx.floors(effects).binding))
    assert 55e6 < supply.floor_ns < 75e6  # 64.5 ms measured at -j 7


def test_a_conditional_finding_combines_only_after_the_finding_it_depends_on():
    """timm on the H100: CUDA graphs are conditional on the loader fix. The path puts them
    right after it; without the loader finding they are not combined at all; every step of the
    path is one replay of the fixes so far, and the last one is the combined estimate."""
    r = _analysis(CONDITIONAL).results
    graphs = next(f for f in r.findings if f.conditional_on)
    assert (graphs.rule, graphs.conditional_on) == ("uncaptured-cuda-graph", "loader-jitter")
    path = [p.rule for p in r.combined.path]
    assert path.index("uncaptured-cuda-graph") == path.index("loader-jitter") + 1
    assert r.combined.path[path.index("uncaptured-cuda-graph")].after == "loader-jitter"
    assert graphs not in order([f for f in r.findings if f.rule != "loader-jitter"])
    steps = [p.predicted_step_ns for p in r.combined.path]
    assert steps == sorted(steps, reverse=True)
    assert steps[-1] == pytest.approx(r.combined.predicted_step_ns)
    # not the product of the findings' own speedups: one replay of the fixes together
    product = 1.0
    for f in r.findings:
        product *= f.estimate.speedup
    assert r.combined.speedup < product


def test_a_rebased_estimate_keeps_its_floor_and_path_on_the_new_step():
    """Under `advisor profile` every estimate moves onto the measured step
    (`advisor.capture.baseline`): the floor and the path's steps move with it, the speedup
    stays, so the report never shows a floor above the predicted step it bounds."""
    c = _analysis(CONDITIONAL).results.combined
    moved = c.on_step(0.8 * c.step_ns)
    assert moved.speedup == c.speedup
    assert moved.predicted_step_ns == pytest.approx(0.8 * c.predicted_step_ns)
    assert moved.floor.ns == pytest.approx(0.8 * c.floor.ns)
    assert [p.predicted_step_ns for p in moved.path] == pytest.approx(
        [0.8 * p.predicted_step_ns for p in c.path])
    assert moved.predicted_step_ns >= moved.floor.ns


@pytest.mark.parametrize("rel", TRACES)
def test_floors_taken_from_the_template_equal_those_walked_again(rel: str):
    """A what-if's floors reuse the template's where its effects left their columns alone
    (`measure`'s ``base``, issue #39): on every what-if of the analysis, equal to the floors
    walked afresh from the what-if's columns."""
    from advisor.engine.floors import GPU_COLUMNS, HOST_COLUMNS, measure

    a = _analysis(rel)
    ctx = a.context
    whatifs = [k for k in ctx.__dict__.get("_replays", {}) if k]
    assert whatifs, rel
    reused = 0
    for effects in whatifs:
        sim = ctx.simulation()
        for e in effects:
            e.apply(sim)
        shared = measure(sim, effects, ctx._baseline_floors)
        assert shared == measure(sim, effects), (rel, effects[:1])
        assert shared == ctx._what_if(effects)[1]
        owned = sim.columns().owned
        reused += owned.isdisjoint(GPU_COLUMNS) or owned.isdisjoint(HOST_COLUMNS)
    assert reused, "no what-if left a side alone: the sharing is not exercised here"
