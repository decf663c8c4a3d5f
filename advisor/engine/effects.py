"""The vocabulary of fixes the what-if model understands.

A rule describes what its fix does to the trace (these kernels disappear, these syncs stop
waiting, this region becomes one graph launch) and never computes a speedup itself; the engine
replays the steps with the effects applied. Effects are plain data so that all findings' effects
can be applied together for the combined estimate, in `ORDER`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.engine.whatif import Simulation


@dataclass(frozen=True)
class Effect:
    def apply(self, sim: Simulation) -> None:
        raise NotImplementedError

    @property
    def order(self) -> int:
        return ORDER.index(type(self)) if type(self) in ORDER else len(ORDER)


@dataclass(frozen=True)
class DropOps(Effect):
    """GPU ops fused into a neighbour (``keep_fraction`` 0) or made that much cheaper.
    ``keep_launches``: the ops' GPU time goes but their launches and the host work before them
    stay (a compiled program whose own host work costs what the eager dispatch it replaces
    did: compiler-fusion's pessimistic bound)."""

    op_ids: tuple[int, ...]
    keep_fraction: float = 0.0
    keep_launches: bool = False

    def apply(self, sim: Simulation) -> None:
        sim.drop_ops(self.op_ids, self.keep_fraction, self.keep_launches)


@dataclass(frozen=True)
class SetOpDurations(Effect):
    """GPU ops take the given time (a faster kernel for the same work)."""

    durations: tuple[tuple[int, int], ...]

    def apply(self, sim: Simulation) -> None:
        sim.set_op_durations(dict(self.durations))


@dataclass(frozen=True)
class ExtendOps(Effect):
    """GPU ops take longer by the given time: a kernel that takes over a removed neighbour's
    work (a GEMM whose epilogue now writes a second tensor). `SetOpDurations` only ever
    shortens an op (two fixes of one kernel keep the faster), so growth is its own effect."""

    extra: tuple[tuple[int, int], ...]

    def apply(self, sim: Simulation) -> None:
        sim.extend_ops(dict(self.extra))


@dataclass(frozen=True)
class RemoveWaits(Effect):
    """Host calls stop blocking on the GPU."""

    call_ids: tuple[int, ...]

    def apply(self, sim: Simulation) -> None:
        sim.unwait(self.call_ids)


@dataclass(frozen=True)
class SetCallDurations(Effect):
    """Host calls take the given time (an allocation served from a preallocated pool)."""

    durations: tuple[tuple[int, int], ...]

    def apply(self, sim: Simulation) -> None:
        sim.set_call_durations(dict(self.durations))


@dataclass(frozen=True)
class AddDispatches(Effect):
    """Each call gets ``per_call`` more eager operators before it, each taking the trace's own
    host time per operator (autocast's casts of FP32 weights and of their gradients)."""

    call_ids: tuple[int, ...]
    per_call: float

    def apply(self, sim: Simulation) -> None:
        sim.add_dispatches(self.call_ids, self.per_call)


@dataclass(frozen=True)
class ScaleHostWork(Effect):
    """Host work between calls inside the intervals takes ``factor`` of its time."""

    intervals: tuple[tuple[int, int], ...]
    factor: float

    def apply(self, sim: Simulation) -> None:
        sim.scale_host_gaps(self.intervals, self.factor)


@dataclass(frozen=True)
class OverlapOps(Effect):
    """GPU ops (copies) move to a side stream and overlap the step."""

    op_ids: tuple[int, ...]
    durations: tuple[tuple[int, int], ...] = field(default=())

    def apply(self, sim: Simulation) -> None:
        sim.to_side_stream(self.op_ids, dict(self.durations))


@dataclass(frozen=True)
class CaptureGraph(Effect):
    """Each host interval is replayed as one CUDA graph."""

    intervals: tuple[tuple[int, int], ...]
    launch_ns: int | None = None  # host cost of one graph launch; default: the measured constant
    node_gap_ns: int | None = None  # gap between graph kernels; default: the measured constant

    def apply(self, sim: Simulation) -> None:
        kwargs = {}
        if self.launch_ns is not None:
            kwargs["launch_ns"] = self.launch_ns
        if self.node_gap_ns is not None:
            kwargs["node_gap_ns"] = self.node_gap_ns
        sim.capture_graph(self.intervals, **kwargs)


@dataclass(frozen=True)
class BatchSupply(Effect):
    """The input pipeline after a loader fix: one batch costs ``ns_per_batch`` to produce and
    ``workers`` produce in parallel. Nothing in the replay changes; it sets the step's loader
    floor (`advisor.engine.floors`): however much the other fixes shorten the rest of the
    step, a batch arrives no faster than the loader makes it."""

    ns_per_batch: float
    workers: float
    source: str  # where the production time was read, for the report

    def apply(self, sim: Simulation) -> None:
        return None

    @property
    def floor_ns(self) -> float:
        return self.ns_per_batch / max(1.0, self.workers)

    @property
    def what(self) -> str:
        return (f"the loader's production time per batch ({self.ns_per_batch / 1e6:.2f} ms, "
                f"{self.source}) over {self.workers:g} workers")


# Kernel-level changes first, graph capture last: capture collapses whatever launches remain.
ORDER: list[type[Effect]] = [
    DropOps, SetOpDurations, ExtendOps, RemoveWaits, SetCallDurations, ScaleHostWork, AddDispatches,
    OverlapOps, CaptureGraph, BatchSupply,
]


def merge(effects: list[Effect]) -> list[Effect]:
    """Several findings' effects as one set, each change counted once.

    Two rules often describe the same change (cpu-bound-loss and uncaptured-cuda-graph both
    capture the step; host-sync and cpu-bound-loss both remove a loss's syncs), and some
    effects compound when applied twice (a kernel kept at 25% twice would keep 6%). Merged:
    per op the most removed fraction and the shortest duration, per call the shortest
    duration, the union of unblocked calls, one graph per region; other effects once each."""
    drop: dict[int, float] = {}
    launch_gone: set[int] = set()  # ops some effect removes with their launches
    op_ns: dict[int, int] = {}
    call_ns: dict[int, int] = {}
    unwait: dict[int, None] = {}
    graphs: dict[tuple, CaptureGraph] = {}
    rest: list[Effect] = []
    for e in effects:
        if isinstance(e, DropOps):  # (per op, and a fusion drops 10^4 ops: ``min`` inlined)
            keep, was = e.keep_fraction, drop.get
            for i in e.op_ids:
                v = was(i, 1.0)
                drop[i] = keep if keep < v else v
            if keep == 0.0 and not e.keep_launches:
                launch_gone.update(e.op_ids)
        elif isinstance(e, SetOpDurations):
            for i, ns in e.durations:
                op_ns[i] = min(op_ns.get(i, ns), ns)
        elif isinstance(e, SetCallDurations):
            for i, ns in e.durations:
                call_ns[i] = min(call_ns.get(i, ns), ns)
        elif isinstance(e, RemoveWaits):
            unwait.update(dict.fromkeys(e.call_ids))
        elif isinstance(e, CaptureGraph):
            graphs.setdefault(tuple(sorted(e.intervals)), e)
        elif e not in rest:
            rest.append(e)
    out: list[Effect] = []
    by_keep: dict[tuple[float, bool], list[int]] = {}
    for i, keep in drop.items():
        # a fully dropped op keeps its launch only if no effect removes the launch with it
        key = (keep, keep == 0.0 and i not in launch_gone)
        ids = by_keep.get(key)
        if ids is None:
            ids = by_keep[key] = []
        ids.append(i)
    out += [DropOps(tuple(ids), keep, launches) for (keep, launches), ids in sorted(by_keep.items())]
    if op_ns:
        out.append(SetOpDurations(tuple(op_ns.items())))
    if unwait:
        out.append(RemoveWaits(tuple(unwait)))
    if call_ns:
        out.append(SetCallDurations(tuple(call_ns.items())))
    out += rest
    out += list(graphs.values())
    return sorted(out, key=lambda e: e.order)
