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


def measure(sim: Simulation, effects: Sequence[Effect] = ()) -> StepFloors:
    """The floors of ``sim`` as its effects left it (`Simulation.columns`), with the loader's
    from the effects that declare a batch supply."""
    c = sim.columns()
    n = len(sim.steps)
    inside = _in_steps(sim)
    lanes: dict[int, int] = {}
    side = 0
    for ops, counted in zip(c.node_ops, inside):
        if not (ops and counted):
            continue
        for j in ops:
            if c.op_removed[j]:
                continue
            if c.op_side[j]:
                side += c.op_dur[j]
            else:
                st = c.op_stream[j]
                lanes[st] = lanes.get(st, 0) + c.op_dur[j]
    gpu = max(max(lanes.values(), default=0), side) / n
    # The host chain's own time inside the steps: nodes that start after the chain's frontier
    # (a call that overlaps another thread's call adds no time of its own to the chain).
    host = sum(g + d for g, d, of, counted in zip(c.gap, c.dur, c.overlap_from, inside)
               if of < 0 and counted) / n
    floors = [Floor("gpu", gpu, "the GPU's busy time of the kernels that stay"),
              Floor("host", host, "the host's own time that stays (calls, Python, the syncs' "
                                  "own time)")]
    supply = [e for e in effects if isinstance(e, BatchSupply)]
    if supply:
        s = max(supply, key=lambda e: e.floor_ns)
        floors.append(Floor("loader", s.floor_ns, s.what))
    return StepFloors(tuple(floors))


def _in_steps(sim: Simulation) -> list[bool]:
    """Per node of the host chain: is its time (the host work before it, its own, the GPU work
    it launches) inside a step? The host time between one step's end and the next one's start
    is in no step's period. Read off the markers once per template."""
    found = sim._derived.get("in_steps")
    if found is None:
        c = sim.columns()
        found, inside = [], False
        for k, ke in zip(c.step, c.step_end):
            if k >= 0:
                found.append(False)  # the host work before a step's start is not the step's
                inside = True
                continue
            found.append(inside)
            if ke >= 0:
                inside = False
        sim._derived["in_steps"] = found
    return found  # type: ignore[return-value]
