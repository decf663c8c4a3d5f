"""The what-if replay's store: a simulation's nodes and ops, and their changeable fields as columns.

A simulation (`advisor.engine.whatif.Simulation`) is built as plain objects, one `Node` per host
call or step marker and one `Op` per GPU op (cheap to build), then sealed: the fields a what-if
may change move to flat lists (`Columns`), which the replay loop reads
(`advisor.engine.sim_replay`), and the objects become views of them (`NodeView`, `OpView`). A
what-if forks the columns: it shares every list with its template and copies one only when it
first changes it (issue #17: this replaced copying every node and op per what-if). What never
changes (calls, ops, observed times, links) stays in the objects, shared read-only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from advisor.graph.model import ApiCall, GpuOp


@dataclass(slots=True)
class Node:
    """One host call, or a zero-length step marker, in the process's host chain."""

    obs_start: int
    obs_end: int
    dur: int
    call: ApiCall | None = None
    step: int | None = None  # index of the step this marker starts
    step_end: int | None = None  # index of the step this marker ends
    gap_from: int = 0  # observed start of the host work in ``gap`` (edits keep it)
    ops: list[int] | tuple[()] = ()  # its ops (`_link_ops`); most nodes launch none: no list
    wait_op: int | None = None
    wake: int = 0
    gap: int = 0  # host work since the chain's frontier ended
    overlap_from: int | None = None  # starts while node `overlap_from` is still running
    overlap_offset: int = 0
    graphed: bool = False
    graph_head: bool = False


@dataclass(slots=True)
class Op:
    op: GpuOp
    stream: tuple[int, int]
    dur: int
    launch_lat: int
    stream_gap: int
    side: bool = False  # moved to a side stream; its time counts against the step period only
    graphed: bool = False
    removed: bool = False  # fused away: its time goes, the waits before it stay


def _fixed(name: str) -> property:
    """A view's field that no what-if changes: read from the entry built at construction."""
    return property(lambda self: getattr(self._e.base[self._i], name))


def _column(name: str, optional: bool = False) -> property:
    """A view's field stored in its simulation's column ``name`` (-1 stands for None)."""
    if optional:
        def get(self):
            v = getattr(self._e.cols, name)[self._i]
            return None if v < 0 else v

        def put(self, v) -> None:
            self._e.cols.own(name)[self._i] = -1 if v is None else v
    else:
        def get(self):
            return getattr(self._e.cols, name)[self._i]

        def put(self, v) -> None:
            self._e.cols.own(name)[self._i] = v
    return property(get, put)


class View:
    """Entry ``i`` of a sealed simulation: changeable fields live in the columns (descriptors
    of the subclass), the rest in the object built at construction, shared read-only."""

    __slots__ = ("_e", "_i")

    def __init__(self, entries: Entries, i: int) -> None:
        self._e, self._i = entries, i

    def __getattr__(self, name: str):
        return getattr(self._e.base[self._i], name)


class NodeView(View):
    """Node ``i`` of a sealed simulation (``call``, ``obs_start``, ``ops``... fixed)."""

    __slots__ = ()
    dur = _column("dur")
    gap = _column("gap")
    gap_from = _column("gap_from")
    overlap_from = _column("overlap_from", optional=True)
    overlap_offset = _column("overlap_offset")
    wait_op = _column("wait_op", optional=True)
    wake = _column("wake")
    graphed = _column("graphed")
    graph_head = _column("graph_head")
    call = _fixed("call")
    ops = _fixed("ops")
    obs_start = _fixed("obs_start")
    obs_end = _fixed("obs_end")


class OpView(View):
    """Op ``i`` of a sealed simulation (``op``, ``stream`` fixed)."""

    __slots__ = ()
    dur = _column("op_dur")
    launch_lat = _column("op_lat")
    stream_gap = _column("op_gap")
    side = _column("op_side")
    graphed = _column("op_graphed")
    removed = _column("op_removed")
    op = _fixed("op")
    stream = _fixed("stream")


class Built(list):
    """Nodes or ops of a simulation not sealed yet: plain objects, changed in place."""

    def edit(self, i: int):
        return self[i]


class Entries:
    """A sealed simulation's nodes (or ops) as its edit methods see them: ``entries[i]`` is a
    view whose changeable fields read and write the simulation's own columns, copy-on-write.

    A what-if (`Simulation.fork`) so shares the template's nodes, ops and columns, and pays only
    for the columns it changes; nothing it does reaches the template (issue #17: this replaces
    copying every node and op per what-if).
    """

    __slots__ = ("base", "cols", "view")

    def __init__(self, base: list, cols: Columns, view: type) -> None:
        self.base, self.cols, self.view = base, cols, view

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int):
        return self.view(self, i)

    def __iter__(self):
        return (self.view(self, i) for i in range(len(self.base)))

    def edit(self, i: int):
        """Entry ``i`` to change (the same view: writes go to this simulation's columns)."""
        return self.view(self, i)



@dataclass(slots=True)
class Columns:
    """A simulation's nodes and ops as flat lists: what the replay loop reads.

    Forks share the lists; `own` copies one before its first change in this simulation."""

    stream_keys: dict[tuple[int, int], int]
    obs_start: list[int]
    is_call: list[bool]
    frontier: list[int]  # the node whose end the host chain continues from (-1: none)
    step: list[int]
    step_end: list[int]
    node_ops: list[list[int] | tuple[()]]
    op_stream: list[int]
    dur: list[int]
    gap: list[int]
    gap_from: list[int]
    overlap_from: list[int]
    overlap_offset: list[int]
    wait_op: list[int]
    wake: list[int]
    graphed: list[bool]
    graph_head: list[bool]
    op_dur: list[int]
    op_lat: list[int]
    op_gap: list[int]
    op_side: list[bool]
    op_graphed: list[bool]
    op_removed: list[bool]
    marker: list[bool]  # the node starts or ends a step (never changes)
    owned: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, nodes: Sequence[Node], ops: Sequence[Op], keys: dict[tuple[int, int], int]) -> Columns:
        frontier, f, f_end = [], -1, -(2**62)
        for i, n in enumerate(nodes):  # observed ends never change: the frontier is fixed
            frontier.append(f)
            if n.obs_end >= f_end:
                f, f_end = i, n.obs_end
        return cls(
            keys, [n.obs_start for n in nodes], [n.call is not None for n in nodes], frontier,
            [-1 if n.step is None else n.step for n in nodes],
            [-1 if n.step_end is None else n.step_end for n in nodes],
            [n.ops for n in nodes], [keys[o.stream] for o in ops],
            [n.dur for n in nodes], [n.gap for n in nodes], [n.gap_from for n in nodes],
            [-1 if n.overlap_from is None else n.overlap_from for n in nodes],
            [n.overlap_offset for n in nodes],
            [-1 if n.wait_op is None else n.wait_op for n in nodes],
            [n.wake for n in nodes], [n.graphed for n in nodes], [n.graph_head for n in nodes],
            [o.dur for o in ops], [o.launch_lat for o in ops], [o.stream_gap for o in ops],
            [o.side for o in ops], [o.graphed for o in ops], [o.removed for o in ops],
            [n.step is not None or n.step_end is not None for n in nodes],
        )

    def own(self, name: str) -> list:
        """Column ``name``, this simulation's own copy, to change."""
        col = getattr(self, name)
        if name not in self.owned:
            col = list(col)
            setattr(self, name, col)
            self.owned.add(name)
        return col

    def fork(self) -> Columns:
        new = copy.copy(self)
        self.owned, new.owned = set(), set()  # shared from now on: both copy before changing
        return new
