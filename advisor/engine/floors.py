"""The step's floors: what no fix on the list can take away, so no estimate goes below it.

A replay can promise more than the step can give where a fix's effect was sized for the step
as it was (a loader fix that hides the loading behind "the rest of the step", a rest that the
next fix shrinks) or where a statistic of the replayed steps moves with the phase of the loop.
Issue #34: findings that depend on each other combined into 19.6x where the best combination
measured 1.41x. Each estimate, single or combined, is therefore bounded from below by three
floors per step, read off the what-if after its effects are applied:

- **GPU**: the kernels that stay run one after another on their stream; the busiest stream's
  time per step (a copy moved to a side stream counts on its own lane).
- **host**: the host's own time that stays: the calls' own time and the host work between
  them, syncs that still wait counted for their own time only (the wait is the GPU's).
- **loader**: with the input pipeline the bottleneck, a batch cannot arrive faster than the
  loader produces it: the production time per batch over the workers the fix proposes
  (`BatchSupply`, declared by the loader fix).

The floors are per-step means over the analysed steps: over the window the time is at least
the sum of each resource's work, so the mean step is at least its mean (a median could dip
below it in a step that borrows time from its neighbour).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.engine.effects import BatchSupply, Effect

if TYPE_CHECKING:
    from advisor.engine.whatif import Simulation


@dataclass(frozen=True)
class Floor:
    """One lower bound on the step after the fixes: ``kind`` "gpu", "host" or "loader"."""

    kind: str
    ns: float
    what: str  # the floor in words, for the report


@dataclass(frozen=True)
class StepFloors:
    """The floors of one what-if; the highest is the one that binds."""

    floors: tuple[Floor, ...]

    @property
    def binding(self) -> Floor | None:
        return max(self.floors, key=lambda f: f.ns, default=None)

    @property
    def ns(self) -> float:
        b = self.binding
        return b.ns if b is not None else 0.0

    def to_dict(self) -> dict[str, float]:
        return {f.kind: f.ns for f in self.floors}


@dataclass(frozen=True)
class PerStep:
    """The GPU and host floors of each step of a what-if, and the loader's (the same for
    every step): averaged over the steps an estimate rests on (`over`)."""

    gpu: tuple[int, ...]
    host: tuple[int, ...]
    loader: Floor | None = None

    def over(self, steps: Sequence[int] | None = None) -> StepFloors:
        """The floors as means over ``steps`` (indices; None: all of them)."""
        idx = range(len(self.gpu)) if steps is None else steps
        n = max(1, len(idx))
        floors = [Floor("gpu", sum(self.gpu[k] for k in idx) / n,
                        "the GPU's busy time of the kernels that stay"),
                  Floor("host", sum(self.host[k] for k in idx) / n,
                        "the host's own time that stays (calls, Python, the syncs' own time)")]
        if self.loader is not None:
            floors.append(self.loader)
        return StepFloors(tuple(floors))


HOST_COLUMNS = frozenset({"gap", "dur", "overlap_from"})
"""The columns the host floor reads: a what-if that changed none of them (`Columns.owned`) has
its template's host floor."""
GPU_COLUMNS = frozenset({"op_removed", "op_side", "op_dur"})
"""The columns the GPU floor reads (with the ops' streams and nodes, which never change)."""


def measure(sim: Simulation, effects: Sequence[Effect] = (), base: PerStep | None = None) -> PerStep:
    """The floors of each step of ``sim`` as its effects left it (`Simulation.columns`), with
    the loader's from the effects that declare a batch supply.

    Per step: the busiest stream's kernels that stay (a side stream's copies on their own
    lane), and the host chain's own time (nodes that start after the chain's frontier; a call
    that overlaps another thread's call adds no time of its own).

    ``base``: the floors of the template ``sim`` was forked from; a floor whose columns the
    what-if left as they were is the template's, taken as it is instead of walked again (most
    fixes change either the host or the GPU side: issue #39)."""
    c = sim.columns()
    owned = c.owned if base is not None else GPU_COLUMNS | HOST_COLUMNS
    need_gpu, need_host = not owned.isdisjoint(GPU_COLUMNS), not owned.isdisjoint(HOST_COLUMNS)
    if base is not None and not (need_gpu or need_host):
        gpu, host_t = base.gpu, base.host
    elif need_gpu:
        gpu, host = _walk(sim, c, need_host)
        host_t = tuple(host) if need_host else base.host  # type: ignore[union-attr]
    else:
        host_t = _host_only(sim, c)
        gpu = base.gpu  # type: ignore[union-attr]
    supply = [e for e in effects if isinstance(e, BatchSupply)]
    loader = None
    if supply:
        s = max(supply, key=lambda e: e.floor_ns)
        loader = Floor("loader", s.floor_ns, s.what)
    return PerStep(gpu, host_t, loader)


def _walk(sim: Simulation, c, with_host: bool) -> tuple[tuple[int, ...], list[int]]:
    """The GPU floor of each step, and (``with_host``) the host floor, in one walk."""
    n = len(sim.steps)
    step_of = _step_of_nodes(sim)
    lanes: list[dict[int, int]] = [{} for _ in range(n)]
    side = [0] * n
    host = [0] * n
    removed, on_side, stream, dur = c.op_removed, c.op_side, c.op_stream, c.op_dur
    for ops, k, g, d, of in zip(c.node_ops, step_of, c.gap, c.dur, c.overlap_from):
        if k < 0:
            continue
        if with_host and of < 0:
            host[k] += g + d
        if not ops:
            continue
        lane = lanes[k]
        for j in ops:
            if removed[j]:
                continue
            if on_side[j]:
                side[k] += dur[j]
            else:
                lane[stream[j]] = lane.get(stream[j], 0) + dur[j]
    gpu = tuple(max(max(lane.values(), default=0), sd) for lane, sd in zip(lanes, side))
    return gpu, host


def _host_only(sim: Simulation, c) -> tuple[int, ...]:
    """The host floor of each step alone (`measure`'s host half)."""
    host = [0] * len(sim.steps)
    for k, g, d, of in zip(_step_of_nodes(sim), c.gap, c.dur, c.overlap_from):
        if k >= 0 and of < 0:
            host[k] += g + d
    return tuple(host)


def _step_of_nodes(sim: Simulation) -> list[int]:
    """Per node of the host chain, the step its time belongs to (the host work before it, its
    own, the GPU work it launches), -1 for none: the host time between one step's end and the
    next one's start is in no step's period. Read off the markers once per template."""
    found = sim._derived.get("step_of_nodes")
    if found is None:
        c = sim.columns()
        found, current = [], -1
        for k, ke in zip(c.step, c.step_end):
            if k >= 0:
                found.append(-1)  # the host work before a step's start is not the step's
                current = k
                continue
            found.append(current)
            if ke >= 0:
                current = -1
        sim._derived["step_of_nodes"] = found
    return found  # type: ignore[return-value]
