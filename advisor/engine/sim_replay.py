"""One replay of a simulation's columns, and the passes of the loop until it settles.

The window's nodes are in observed start order, a topological order of the dependency graph
(`advisor.engine.whatif`), so one linear pass over the columns (`advisor.engine.sim_columns`)
computes every node's start and end and every op's end. The window is one stretch of a loop:
`settle` replays it pass after pass, each from the GPU queues the pass before left (`Queues`),
until they repeat.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from advisor.engine.sim_columns import Columns

SETTLE_TOL = 0.005
"""A replay has settled when another pass of the window would start from the same GPU queues,
or repeats the last pass's step periods, within this share of the mean period (0.5%: under
the 2% a finding must save, `advisor.engine.runner.MIN_SPEEDUP`)."""

MAX_SETTLE_PASSES = 6
"""Passes of the window before a replay that has not settled is given up as drifting (a queue
that grows without end in a GPU-bound loop repeats its periods from the second pass)."""

Timeline = tuple[list[int], list[int], list[int]]
"""A pass's node starts, node ends and op ends, in ns."""


@dataclass(frozen=True)
class Replay:
    """Per-step GPU-side periods of a replay, in ns, once settled (`Simulation.run`):
    ``settled`` False when the passes ran out before two agreed (the periods are then the
    last pass's, still drifting); ``passes`` how many were replayed."""

    periods: tuple[int, ...]
    settled: bool = True
    passes: int = 1

    @property
    def mean_ns(self) -> float:
        return statistics.fmean(self.periods) if self.periods else 0.0

    @property
    def median_ns(self) -> float:
        return statistics.median(self.periods) if self.periods else 0.0



@dataclass(frozen=True, slots=True)
class Queues:
    """Where the GPU's streams stand when a pass of the replay starts, relative to the host
    chain's start: each stream's end of queued work (None: never used), the cross-stream waits
    a removed op carried over, and the end of all launched work."""

    free: tuple[int | None, ...]
    carry: tuple[int, ...]
    latest: int | None

    @classmethod
    def observed(cls, free_at: dict[tuple[int, int], int], keys: dict[tuple[int, int], int],
                 origin: int) -> Queues:
        """The queues the trace shows when the window opens (work launched before it)."""
        free: list[int | None] = [None] * len(keys)
        for key, t in free_at.items():
            free[keys[key]] = t - origin
        latest = max(free_at.values(), default=None)
        return cls(tuple(free), (0,) * len(keys), None if latest is None else latest - origin)

    @classmethod
    def empty(cls, n: int) -> Queues:
        """Nothing queued on any of ``n`` streams."""
        return cls((None,) * n, (0,) * n, None)

    def same_as(self, other: Queues, tol: float) -> bool:
        """Would a pass from these queues replay as one from ``other``? Work that ends before
        the host starts holds nothing back, so only the queued work ahead of it counts."""
        def ahead(t: int | None) -> int:
            return t if t is not None and t > 0 else 0

        return (abs(ahead(self.latest) - ahead(other.latest)) <= tol
                and all(abs(ahead(a) - ahead(b)) <= tol for a, b in zip(self.free, other.free))
                and all(abs(a - b) <= tol for a, b in zip(self.carry, other.carry)))


def settle(c: Columns, n_steps: int,
           one_pass: Callable[[Columns, Queues], tuple[list[int], Queues]]) -> Replay:
    """The steps replayed until they settle: the window is replayed as the loop it is a
    part of, each pass (``one_pass``) starting from the GPU queues the previous pass left
    behind, until a pass leaves them as it found them or repeats the previous pass's periods
    (`SETTLE_TOL`).

    The first pass starts with the queues empty, not with the work the trace shows queued
    when the window opened: that backlog is the unfixed program's, and a fix that changes
    how far the GPU runs behind the host turns it into a transient (issue #35: with
    unfused-attention's fix the steps ran 5.14 ms for four steps, then 8.3-10.0 ms, and
    the estimate was the median of the transient). From empty queues each pass leaves
    them at least as full as it found them, so the passes climb to the loop's own backlog
    (the host-bound loop's) or, where the GPU is the bottleneck, to periods that repeat
    while the queue grows."""
    seed = Queues.empty(len(c.stream_keys))
    periods, left = one_pass(c, seed)
    passes, settled = 1, False
    while True:
        tol = SETTLE_TOL * (statistics.fmean(periods) if periods else 0.0)
        if left.same_as(seed, tol):
            settled = True  # the next pass starts as this one did: it would repeat it
            break
        if passes >= MAX_SETTLE_PASSES:
            break
        seed = left
        again, left = one_pass(c, seed)
        passes += 1
        if all(abs(a - b) <= tol for a, b in zip(again, periods)):
            periods, settled = again, True  # the queue grows, the periods repeat
            break
        periods = again
    return Replay(tuple(periods), settled=settled, passes=passes)


def replay_pass(c: Columns, n_steps: int, seed: Queues) -> tuple[list[int], Queues, Timeline]:
    """One replay of the window's ``n_steps`` steps from the GPU queues ``seed``: the steps'
    periods, the queues it leaves for the next pass (relative to where its host chain ends),
    and the timeline (node starts, node ends, op ends: for inspection)."""
    n_nodes = len(c.dur)
    frontier_of, ovf, ovo, gap, dur = c.frontier, c.overlap_from, c.overlap_offset, c.gap, c.dur
    step_start, step_end, head, graphed = c.step, c.step_end, c.graph_head, c.graphed
    node_ops, wait_op, wake = c.node_ops, c.wait_op, c.wake
    o_stream, o_dur, o_lat, o_gap, o_side, o_removed = (c.op_stream, c.op_dur, c.op_lat,
                                                        c.op_gap, c.op_side, c.op_removed)
    start = [0] * n_nodes
    end = [0] * n_nodes
    op_end = [0] * len(o_dur)
    s = c.obs_start[0]
    stream_free: list[int | None] = [None if t is None else s + t for t in seed.free]
    carry = list(seed.carry)
    # max end of any op launched so far (the GPU-side projection), starting with the work
    # launched before the window that the GPU was still running
    latest_end_launched = s + seed.latest if seed.latest is not None else 0
    starts_at = [0] * n_steps
    ends_at = [0] * n_steps
    side_time = [0] * (n_steps + 1)
    current_step = 0
    graph_head_start = None
    # The columns are walked together (zip) rather than indexed one by one: this loop is
    # what every what-if pays, once per node of the window.
    for i, of, oo, fr, g, d, ops, w, mark, hd in zip(range(n_nodes), ovf, ovo, frontier_of,
                                                     gap, dur, node_ops, wait_op, c.marker,
                                                     head):
        if i:
            s = start[of] + oo if of >= 0 else end[fr] + g
        if mark:
            k = step_start[i]
            if k >= 0:
                starts_at[k] = s if s > latest_end_launched else latest_end_launched
                current_step = k
            k = step_end[i]
            if k >= 0:
                ends_at[k] = s if s > latest_end_launched else latest_end_launched
        e = s + d
        if ops:
            if hd:
                graph_head_start = s
            launch_base = graph_head_start if (graphed[i] and graph_head_start is not None) else s
            for j in ops:
                st = o_stream[j]
                free = stream_free[st]
                if o_side[j] or o_removed[j]:
                    # The op leaves this stream, but a wait before it (a cross-stream event
                    # the gap encodes) still holds back whatever follows it on the stream,
                    # and a host sync that waited for it now waits for the stream up to its
                    # place.
                    carry[st] += o_gap[j]
                    if o_side[j]:
                        side_time[min(current_step, n_steps - 1)] += o_dur[j]
                    place = launch_base + o_lat[j]
                    if free is not None and free + carry[st] > place:
                        place = free + carry[st]
                    op_end[j] = place
                    continue
                os_ = launch_base + o_lat[j]
                if free is not None:
                    ready = free + o_gap[j] + carry[st]
                    carry[st] = 0
                    if ready > os_:
                        os_ = ready
                t = os_ + o_dur[j]
                op_end[j] = t
                stream_free[st] = t
                if t > latest_end_launched:
                    latest_end_launched = t
        elif hd:
            graph_head_start = s
        if w >= 0 and op_end[w] + wake[i] > e:
            e = op_end[w] + wake[i]
        start[i] = s
        end[i] = e
    periods = [max(ends_at[k] - starts_at[k], side_time[k]) for k in range(n_steps)]
    # The loop goes on where the host chain stands at the window's end (its last node, the
    # last step's end marker): the queues relative to that instant seed the next pass.
    restart = start[-1] if n_nodes else 0
    left = Queues(tuple(None if t is None else t - restart for t in stream_free),
                   tuple(carry), latest_end_launched - restart if n_nodes else None)
    return periods, left, (start, end, op_end)
