"""Which line of the user's script: host time, GPU idle and findings mapped to the user's frames.

Traces recorded with Python stacks (torch.profiler ``with_stack``, which `advisor profile` turns
on inside its window) hold every Python call on the host threads as a nested range. Each
thread's ranges (Python frames and the framework operators inside them) are swept once into
disjoint segments, each labelled with the *nearest user frame* on the stack at that time
(library frames fold into it, `advisor.graph.frames` says which are library) and the outermost
library call made from that user frame (``via``: ``Tensor.item``, ``backward (torch/_tensor.py)``,
``aten::div``). Everything the reports show is a sum over those segments:

* GPU idle: each idle interval of `advisor.graph.step_breakdown.idle_segments`, split by the segments
  of the step's thread that cover it;
* host time per step, by the stack of user frames (a flame view of the user's code);
* phases by the code they run: a phase span (cut by hooks, so named by its position between
  forward and backward) split into the user functions its owner frame calls directly (a
  ``get_batch()`` between forward and backward is ``get_batch``, not ``loss``);
* each finding's evidence (the calls and kernels it cites), by the frame that made the call.

Backward work is named after the forward code that built it. ``loss.backward()`` runs the
autograd graph on autograd's own thread (one per device), where no user frame is on the stack:
by the stack alone, all of it is the ``backward()`` call. But torch.profiler records, on every
forward operator, the autograd *sequence number* of the node it creates, and on each
``autograd::engine::evaluate_function: XBackward0`` the number of the node it runs (with the
forward thread's id): `Timelines` joins the two, so each node's backward is labelled with the
user frame of the forward operator that created it (``via`` `BACKWARD_OF`) and ``through``
the call it ran under (``train.py:305 <module> -> backward``). While the step's thread waits
in a library call (``backward()``, a framework's ``fit``), its time and the GPU idle in it go
to the frames whose backward the autograd thread is running then. A per-sample Python loss
loop that builds hundreds of tiny nodes is then the loss loop's line, not ``backward()``.

Per-step figures are totals over the analysed steps divided by their number.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from advisor.graph.frames import Frame, call_label, is_own_frame, is_user_file, parse
from advisor.graph.model import SAMPLED, CpuRange, OpGraph, RangeSource, Step
from advisor.graph.op_names import EVALUATE_FUNCTION as OP_EVALUATE_FUNCTION
from advisor.graph.step_breakdown import idle_segments

NO_FRAME = Frame("(no Python frame)", 0, "")
"""Time on the thread when the profiler saw no Python frame running."""

BACKWARD_OF = "backward of its ops"
"""The ``via`` of time spent running the backward of the autograd nodes a user frame created."""

AUTOGRAD = Frame("autograd", 0, "backward")
"""The flame view's leaf under a user frame for the backward of the nodes it created."""

EVALUATE_FUNCTION = OP_EVALUATE_FUNCTION


@dataclass(frozen=True, slots=True)
class UserCall:
    """One user frame on a stack; ``direct``: called straight from the user frame above it
    (a plain Python call), not through library code (``model(x)`` reaches ``forward`` through
    ``nn.Module.__call__``)."""

    frame: Frame
    direct: bool


@dataclass(frozen=True, slots=True)
class Where:
    """What a host thread was running: its user-frame stack (outermost first) and the outermost
    library call made from the innermost user frame ("" when in the frame's own code)."""

    path: tuple[UserCall, ...]
    via: str
    # for backward work (``via`` BACKWARD_OF): the frame and call it ran under, when known
    through: tuple[Frame, str] | None = None

    @property
    def frame(self) -> Frame:
        return self.path[-1].frame if self.path else NO_FRAME


@dataclass
class ThreadTimeline:
    """Disjoint, sorted segments of one thread, each with what it was running."""

    starts: list[int]
    ends: list[int]
    where: list[Where]

    def overlapping(self, a: int, b: int) -> Iterator[tuple[int, int, Where]]:
        """Segments clipped to [a, b), in time order."""
        i = max(0, bisect_right(self.starts, a) - 1)
        n = len(self.starts)
        while i < n and self.starts[i] < b:
            s, e = max(a, self.starts[i]), min(b, self.ends[i])
            if e > s:
                yield s, e, self.where[i]
            i += 1

    def at(self, t: int) -> Where | None:
        i = bisect_right(self.starts, t) - 1
        if i >= 0 and self.ends[i] > t:
            return self.where[i]
        return None


WRAPPERS = frozenset(("wrapper", "_no_grad_wrapper", "decorate_context", "inner", "_fn",
                      "wrapped", "_use_grad", "wrapped_fn", "_wrapper"))
"""Names of decorators' wrapper functions: a library call through one is named after the call
it wraps (``clip_grad_norm_``, not ``_no_grad_wrapper``), the longest call inside it. A call
into `advisor profile`'s own hooks (its DataLoader ``__next__``) is named the same way, after
the call it wraps."""


def _longest_children(order: Sequence[CpuRange]) -> list[int]:
    """For each range (sorted by start, longest first), its longest direct child (-1: none);
    advisor's own hooks are never that child (an optimizer step's ``wrapper`` is named after
    the step it runs, not after `advisor profile`'s ``opt_post`` that closes the window)."""
    longest = [-1] * len(order)
    stack: list[int] = []
    for i, r in enumerate(order):
        while stack and order[stack[-1]].end_ns <= r.start_ns:
            stack.pop()
        if stack and not (r.source is RangeSource.PYTHON and _own(r.name)):
            p = stack[-1]
            c = longest[p]
            if c < 0 or order[c].duration_ns < r.duration_ns:
                longest[p] = i
        stack.append(i)
    return longest


def _unwrapped(order: Sequence[CpuRange], longest: list[int], i: int) -> str:
    """The range's name, or for a decorator's wrapper the name of the Python call it wraps."""
    for _ in range(4):
        frame = _parse(order[i].name) if order[i].source is RangeSource.PYTHON else None
        own = frame is not None and _own(order[i].name)
        j = longest[i]
        if frame is None or not (frame.function in WRAPPERS or own):
            break
        if j < 0:
            # advisor's own hook with nothing under it: its function's name, never its file
            return frame.function if own else order[i].name
        if order[j].source is not RangeSource.PYTHON or _parse(order[j].name) is None:
            # a wrapper is named after a Python call only; advisor's hook after whatever it
            # ran (the profiler's own range of the DataLoader's __next__, an operator)
            return order[j].name if own else order[i].name
        i = j
    return order[i].name


@lru_cache(maxsize=1 << 16)
def _user_frame(name: str) -> Frame | None:
    """The frame a ``python_function`` range names when it is the user's code, else None
    (one parse per distinct name: a window repeats its frames thousands of times)."""
    frame = parse(name)
    return frame if frame is not None and is_user_file(frame.file) else None


_parse = lru_cache(maxsize=1 << 16)(parse)
_own = lru_cache(maxsize=1 << 16)(is_own_frame)
_call_label = lru_cache(maxsize=1 << 16)(call_label)


def _sweep(ranges: Sequence[CpuRange], window_start: int,
           origin: Callable[[CpuRange], Where | None] | None = None) -> ThreadTimeline:
    """Flatten nested ranges into segments labelled by the innermost range's `Where`.

    A frame the profiler found already running when it started (the training loop itself) is
    named with the line it was executing then, not the line it starts at: its line is dropped
    (0) so the same function is one key whatever line the window caught it on. Frames advisor
    sampled (`advisor.ingest.pystacks`) keep theirs: a function's is its first line, and
    module-level code's the line it ran, which is what names it. ``origin``
    names a backward operator's forward code (`Timelines`); everything inside it is its.
    """
    order = sorted(ranges, key=lambda r: (r.start_ns, -r.end_ns))
    longest = _longest_children(order)
    starts: list[int] = []
    ends: list[int] = []
    where: list[Where] = []
    root = Where((), "")
    stack: list[tuple[int, Where, bool]] = []  # (end, where, is_user)
    cur = order[0].start_ns if order else 0
    interned: dict[Where, Where] = {}

    def emit(upto: int) -> None:
        nonlocal cur
        if upto > cur:
            w = stack[-1][1] if stack else root
            if starts and ends[-1] == cur and where[-1] is w:
                ends[-1] = upto
            else:
                starts.append(cur)
                ends.append(upto)
                where.append(w)
            cur = upto

    # A window repeats few stacks: each (parent, what this range adds) is built and interned
    # once, then found by a key that hashes in O(1) (a `Where` hashes its whole path).
    made: dict[tuple, Where] = {}
    python = RangeSource.PYTHON
    for idx, r in enumerate(order):
        while stack and stack[-1][0] <= r.start_ns:
            emit(stack[-1][0])
            stack.pop()
        emit(r.start_ns)
        end = min(r.end_ns, stack[-1][0]) if stack else r.end_ns
        parent = stack[-1] if stack else None
        parent_where = parent[1] if parent else root
        parent_user = parent[2] if parent else True
        user = r.source is python and _user_frame(r.name) is not None
        fwd = origin(r) if origin is not None and r.fwd_thread > 0 else None
        if fwd is not None:
            through = (parent_where.frame, parent_where.via) if parent_where.path else None
            w = Where(fwd.path, BACKWARD_OF, through)
            w = interned.setdefault(w, w)
        elif user:
            key = (id(parent_where), r.name, r.start_ns <= window_start, parent_user)
            w = made.get(key)
            if w is None:
                frame = _user_frame(r.name)
                if r.start_ns <= window_start and r.domain != SAMPLED:
                    frame = Frame(frame.file, 0, frame.function)
                w = Where((*parent_where.path, UserCall(frame, parent_user)), "")
                w = made[key] = interned.setdefault(w, w)
        elif parent_user:
            label = _call_label(_unwrapped(order, longest, idx))
            key = (id(parent_where), label)
            w = made.get(key)
            if w is None:
                w = Where(parent_where.path, label)
                w = made[key] = interned.setdefault(w, w)
        else:
            w = parent_where
        stack.append((end, w, user))
    while stack:
        emit(stack[-1][0])
        stack.pop()
    return ThreadTimeline(starts, ends, where)


@dataclass(frozen=True)
class LineCost:
    frame: Frame
    via: str
    ns_per_step: float
    count: int = 0  # evidence events (findings only)
    caller: Frame | None = None  # the user frame that called ``frame`` directly, if one did
    through: tuple[Frame, str] | None = None  # backward work: the frame and call it ran under


@dataclass(frozen=True)
class FlameNode:
    path: tuple[Frame, ...]
    total_ns_per_step: float
    self_ns_per_step: float


@dataclass(frozen=True)
class PhasePart:
    phase: str
    frame: Frame | None  # None: the phase's own work (the hooks' name fits)
    ns_per_step: float


@dataclass
class SourceAttribution:
    """Host time, GPU idle, phases and findings of the analysed steps by the user's frames."""

    steps: int
    thread: tuple[int, int]
    idle: list[LineCost] = field(default_factory=list)
    host: list[LineCost] = field(default_factory=list)
    flame: list[FlameNode] = field(default_factory=list)
    phases: list[PhasePart] = field(default_factory=list)
    findings: dict[int, list[LineCost]] = field(default_factory=dict)  # finding index -> lines
    python_frames: int = 0
    timelines: Timelines | None = field(default=None, repr=False, compare=False)


def has_stacks(graph: OpGraph) -> bool:
    """True when the trace recorded Python frames (torch.profiler ``with_stack``)."""
    return any(r.source is RangeSource.PYTHON for r in graph.ranges)


class Timelines:
    """Per-thread timelines, built on first use (only the threads a question touches).

    `thread` names backward operators after the forward code that created their autograd
    node: a backward op (``fwd_thread`` > 0) is joined to the forward op of the same process
    with its sequence number (``fwd_thread`` 0, the last one started with that number on its
    thread: the op that created the node; ops that create none record the number the next
    node will take), and labelled with that forward op's user frames, read from the *plain*
    timeline of the forward thread (stacks only, no joins). The trace gives the forward
    thread as the profiler's own thread number, not the OS thread id: when several threads of
    the process ran forward ops with that sequence number, the one that started it last before
    the backward op is taken.
    """

    def __init__(self, graph: OpGraph, window_start: int) -> None:
        self.graph = graph
        self.window_start = window_start
        self._by_thread: dict[tuple[int, int], list[CpuRange]] | None = None
        self._plain: dict[tuple[int, int], ThreadTimeline] = {}
        self._built: dict[tuple[int, int], ThreadTimeline] = {}
        self._forward: dict[tuple[int, int], list[CpuRange]] | None = None
        self._backward_threads: set[tuple[int, int]] = set()
        self._merged: dict[tuple[int, int], ThreadTimeline | None] = {}

    def _ranges(self, key: tuple[int, int]) -> list[CpuRange]:
        if self._by_thread is None:
            by: dict[tuple[int, int], list[CpuRange]] = defaultdict(list)
            forward: dict[tuple[int, int], dict[int, CpuRange]] = defaultdict(dict)
            for r in self.graph.ranges:
                if r.source in (RangeSource.PYTHON, RangeSource.OPERATOR):
                    by[(r.pid, r.tid)].append(r)
                    if r.fwd_thread == 0:
                        last = forward[(r.pid, r.sequence)]
                        seen = last.get(r.tid)
                        if seen is None or seen.start_ns <= r.start_ns:
                            last[r.tid] = r
                    elif r.fwd_thread > 0 and r.name.startswith(EVALUATE_FUNCTION):
                        self._backward_threads.add((r.pid, r.tid))
            self._by_thread = by
            self._forward = {k: sorted(v.values(), key=lambda r: r.start_ns)
                             for k, v in forward.items()}
        return self._by_thread.get(key, [])

    def plain(self, pid: int, tid: int) -> ThreadTimeline:
        """The thread by its own Python stacks alone."""
        key = (pid, tid)
        if key not in self._plain:
            self._plain[key] = _sweep(self._ranges(key), self.window_start)
        return self._plain[key]

    def origin(self, r: CpuRange) -> Where | None:
        """The user frames of the forward op whose autograd node backward op ``r`` runs."""
        if not r.name.startswith(EVALUATE_FUNCTION):
            return None
        self._ranges((r.pid, r.tid))  # builds the index of forward ops on first use
        fwd = None
        for cand in (self._forward or {}).get((r.pid, r.sequence), ()):
            if cand.start_ns > r.start_ns:
                break
            fwd = cand
        if fwd is None:
            return None
        w = self.plain(fwd.pid, fwd.tid).at(fwd.start_ns)
        return w if w is not None and w.path else None

    def thread(self, pid: int, tid: int) -> ThreadTimeline:
        """The thread, its backward ops named after the forward code that built them."""
        key = (pid, tid)
        if key not in self._built:
            ranges = self._ranges(key)
            if key in self._backward_threads:
                self._built[key] = _sweep(ranges, self.window_start, self.origin)
            else:
                self._built[key] = self.plain(pid, tid)
        return self._built[key]

    def backward_elsewhere(self, pid: int, tid: int) -> ThreadTimeline | None:
        """Backward work of the process's other threads (autograd's), as one timeline of
        the segments named after forward code; overlaps go to the segment started first."""
        key = (pid, tid)
        if key not in self._merged:
            self._ranges(key)
            segs: list[tuple[int, int, Where]] = []
            for other in sorted(self._backward_threads):
                if other[0] != pid or other == key:
                    continue
                t = self.thread(*other)
                segs.extend((a, b, w) for a, b, w in zip(t.starts, t.ends, t.where)
                            if w.via == BACKWARD_OF)
            segs.sort(key=lambda x: x[0])
            starts: list[int] = []
            ends: list[int] = []
            where: list[Where] = []
            for a, b, w in segs:
                if ends and a < ends[-1]:
                    a = ends[-1]
                if b > a:
                    starts.append(a)
                    ends.append(b)
                    where.append(w)
            self._merged[key] = ThreadTimeline(starts, ends, where) if starts else None
        return self._merged[key]


def _waiting_on_backward(tl: ThreadTimeline, backward: ThreadTimeline | None, a: int, b: int,
                         interned: dict[Where, Where]) -> Iterator[tuple[int, int, Where]]:
    """The thread's segments in [a, b); while it waits in a library call (``backward()``) and
    autograd's thread runs the backward of known forward code, that code instead."""
    for s, e, w in tl.overlapping(a, b):
        if backward is None or (w.path and not w.via):
            yield s, e, w
            continue
        cur = s
        for bs, be, bw in backward.overlapping(s, e):
            if bs > cur:
                yield cur, bs, w
            sub = Where(bw.path, bw.via, (w.frame, w.via) if w.path else bw.through)
            yield bs, be, interned.setdefault(sub, sub)
            cur = be
        if e > cur:
            yield cur, e, w


def _caller(w: Where) -> Frame | None:
    if len(w.path) > 1 and w.path[-1].direct:
        return w.path[-2].frame
    return None


_Key = tuple[Frame, str, "tuple[Frame, str] | None"]


def _key(w: Where) -> _Key:
    return (w.frame, w.via, w.through)


def _ranked(costs: dict[_Key, float], n: int,
            callers: dict[Frame, dict[Frame | None, float]]) -> list[LineCost]:
    def caller(f: Frame) -> Frame | None:
        by = callers.get(f)
        return max(by, key=lambda c: by[c]) if by else None

    return [LineCost(f, via, ns / n, caller=caller(f), through=through)
            for (f, via, through), ns in sorted(costs.items(), key=lambda kv: -kv[1]) if ns > 0]


def _phase_parts(tl: ThreadTimeline, step: Step, out: dict[tuple[str, Frame | None], float]) -> None:
    for phase, spans in step.phases.items():
        for s, e in spans:
            owner = tl.at(s)
            depth = len(owner.path) if owner else 0
            prefix = owner.path if owner else ()
            for a, b, w in tl.overlapping(s, e):
                part = None
                if (len(w.path) > depth and w.path[:depth] == prefix and w.path[depth].direct):
                    part = w.path[depth].frame
                out[(phase, part)] += b - a


def attribute(graph: OpGraph, steps: Sequence[Step]) -> SourceAttribution | None:
    """The analysed steps by user frame; None when the trace has no Python stacks or steps."""
    if not steps or not has_stacks(graph):
        return None
    pid, tid = steps[0].pid, steps[0].tid
    first = min(s.cpu_start_ns for s in graph.steps) if graph.steps else steps[0].cpu_start_ns
    timelines = Timelines(graph, first)
    tl = timelines.thread(pid, tid)
    backward = timelines.backward_elsewhere(pid, tid)
    interned: dict[Where, Where] = {}
    n = len(steps)
    idle: dict[_Key, float] = defaultdict(float)
    host: dict[_Key, float] = defaultdict(float)
    flame_self: dict[tuple[Frame, ...], float] = defaultdict(float)
    phases: dict[tuple[str, Frame | None], float] = defaultdict(float)
    callers: dict[Frame, dict[Frame | None, float]] = defaultdict(lambda: defaultdict(float))
    for step in steps:
        for a, b, _cause in idle_segments(graph, step):
            covered = a
            for s, e, w in _waiting_on_backward(tl, backward, a, b, interned):
                idle[_key(w)] += e - s
                covered += e - s
            if b > covered:
                idle[(NO_FRAME, "", None)] += b - covered
        for s, e, w in _waiting_on_backward(tl, backward, step.cpu_start_ns, step.cpu_end_ns,
                                            interned):
            host[_key(w)] += e - s
            callers[w.frame][_caller(w)] += e - s
            path = tuple(c.frame for c in w.path)
            flame_self[(*path, AUTOGRAD) if w.via == BACKWARD_OF else path] += e - s
        _phase_parts(tl, step, phases)
    flame_total: dict[tuple[Frame, ...], float] = defaultdict(float)
    for path, ns in flame_self.items():
        for k in range(1, len(path) + 1):
            flame_total[path[:k]] += ns
    flame = [FlameNode(p, flame_total[p] / n, flame_self.get(p, 0.0) / n)
             for p in sorted(flame_total, key=lambda p: (len(p), -flame_total[p]))]
    return SourceAttribution(
        steps=n, thread=(pid, tid), idle=_ranked(idle, n, callers),
        host=_ranked(host, n, callers), flame=flame,
        phases=[PhasePart(ph, f, ns / n) for (ph, f), ns in
                sorted(phases.items(), key=lambda kv: -kv[1]) if ns > 0],
        python_frames=sum(1 for r in graph.ranges if r.source is RangeSource.PYTHON),
        timelines=timelines,
    )


def attribute_findings(attr: SourceAttribution, graph: OpGraph, findings: Sequence) -> None:
    """Each finding's evidence calls and kernels by the user frame that made the call.

    A kernel counts where its launching call was made; a call made by the backward of an
    autograd node counts at the forward code that created the node (`Timelines`); any other
    call on a thread with no user frame (a DataLoader pin thread) counts where the analysed
    thread was at that moment (waiting in ``backward()``, say). Fills ``attr.findings``.
    """
    tls = attr.timelines
    if tls is None:
        return
    calls = {f"api:{c.id}": c for c in graph.api_calls}
    ops = {f"gpu:{o.id}": o for o in graph.gpu_ops}
    main = tls.thread(*attr.thread)
    for k, finding in enumerate(findings):
        ids = getattr(getattr(finding, "evidence", None), "node_ids", ()) or ()
        where: dict[tuple[Frame, str, Frame | None, tuple[Frame, str] | None], list[float]] = \
            defaultdict(lambda: [0, 0.0])
        steps = set(getattr(finding.evidence, "steps", ()) or ()) or {0}
        for node in ids:
            call = calls.get(node)
            if call is None and node in ops:
                call = graph.launcher(ops[node])
            if call is None:
                continue
            w = tls.thread(call.pid, call.tid).at(call.start_ns)
            if w is not None and w.via == BACKWARD_OF and w.through is None:
                m = main.at(call.start_ns)
                if m is not None and m.path:
                    w = Where(w.path, w.via, (m.frame, m.via))
            if w is None or not w.path:
                w = main.at(call.start_ns)
            if w is None:
                continue
            acc = where[(w.frame, w.via, _caller(w), w.through)]
            acc[0] += 1
            acc[1] += call.duration_ns
        if where:
            attr.findings[k] = [
                LineCost(f, via, ns / len(steps), int(cnt), caller, through)
                for (f, via, caller, through), (cnt, ns)
                in sorted(where.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))]


__all__ = ["BACKWARD_OF", "FlameNode", "LineCost", "PhasePart", "SourceAttribution", "Where",
           "attribute"]
