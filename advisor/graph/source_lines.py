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

Per-step figures are totals over the analysed steps divided by their number.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from advisor.graph.frames import Frame, call_label, is_user_file, parse
from advisor.graph.model import CpuRange, OpGraph, RangeSource, Step
from advisor.graph.step_breakdown import idle_segments

NO_FRAME = Frame("(no Python frame)", 0, "")
"""Time on the thread when the profiler saw no Python frame running."""


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
it wraps (``clip_grad_norm_``, not ``_no_grad_wrapper``), the longest call inside it."""


def _longest_children(order: Sequence[CpuRange]) -> list[int]:
    """For each range (sorted by start, longest first), its longest direct child (-1: none)."""
    longest = [-1] * len(order)
    stack: list[int] = []
    for i, r in enumerate(order):
        while stack and order[stack[-1]].end_ns <= r.start_ns:
            stack.pop()
        if stack:
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
        j = longest[i]
        if frame is None or frame.function not in WRAPPERS or j < 0:
            break
        if order[j].source is not RangeSource.PYTHON or _parse(order[j].name) is None:
            break
        i = j
    return order[i].name


@lru_cache(maxsize=1 << 16)
def _user_frame(name: str) -> Frame | None:
    """The frame a ``python_function`` range names when it is the user's code, else None
    (one parse per distinct name: a window repeats its frames thousands of times)."""
    frame = parse(name)
    return frame if frame is not None and is_user_file(frame.file) else None


_parse = lru_cache(maxsize=1 << 16)(parse)
_call_label = lru_cache(maxsize=1 << 16)(call_label)


def _sweep(ranges: Sequence[CpuRange], window_start: int) -> ThreadTimeline:
    """Flatten nested ranges into segments labelled by the innermost range's `Where`.

    A frame the profiler found already running when it started (the training loop itself) is
    named with the line it was executing then, not the line it starts at: its line is dropped
    (0) so the same function is one key whatever line the window caught it on.
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
        if user:
            key = (id(parent_where), r.name, r.start_ns <= window_start, parent_user)
            w = made.get(key)
            if w is None:
                frame = _user_frame(r.name)
                if r.start_ns <= window_start:
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
    """Per-thread timelines, built on first use (only the threads a question touches)."""

    def __init__(self, graph: OpGraph, window_start: int) -> None:
        self.graph = graph
        self.window_start = window_start
        self._by_thread: dict[tuple[int, int], list[CpuRange]] | None = None
        self._built: dict[tuple[int, int], ThreadTimeline] = {}

    def thread(self, pid: int, tid: int) -> ThreadTimeline:
        key = (pid, tid)
        if key not in self._built:
            if self._by_thread is None:
                by: dict[tuple[int, int], list[CpuRange]] = defaultdict(list)
                for r in self.graph.ranges:
                    if r.source in (RangeSource.PYTHON, RangeSource.OPERATOR):
                        by[(r.pid, r.tid)].append(r)
                self._by_thread = by
            self._built[key] = _sweep(self._by_thread.get(key, []), self.window_start)
        return self._built[key]


def _caller(w: Where) -> Frame | None:
    if len(w.path) > 1 and w.path[-1].direct:
        return w.path[-2].frame
    return None


def _ranked(costs: dict[tuple[Frame, str], float], n: int,
            callers: dict[Frame, dict[Frame | None, float]]) -> list[LineCost]:
    def caller(f: Frame) -> Frame | None:
        by = callers.get(f)
        return max(by, key=lambda c: by[c]) if by else None

    return [LineCost(f, via, ns / n, caller=caller(f))
            for (f, via), ns in sorted(costs.items(), key=lambda kv: -kv[1]) if ns > 0]


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
    n = len(steps)
    idle: dict[tuple[Frame, str], float] = defaultdict(float)
    host: dict[tuple[Frame, str], float] = defaultdict(float)
    flame_self: dict[tuple[Frame, ...], float] = defaultdict(float)
    phases: dict[tuple[str, Frame | None], float] = defaultdict(float)
    callers: dict[Frame, dict[Frame | None, float]] = defaultdict(lambda: defaultdict(float))
    for step in steps:
        for a, b, _cause in idle_segments(graph, step):
            covered = a
            for s, e, w in tl.overlapping(a, b):
                idle[(w.frame, w.via)] += e - s
                covered += e - s
            if b > covered:
                idle[(NO_FRAME, "")] += b - covered
        for s, e, w in tl.overlapping(step.cpu_start_ns, step.cpu_end_ns):
            host[(w.frame, w.via)] += e - s
            callers[w.frame][_caller(w)] += e - s
            flame_self[tuple(c.frame for c in w.path)] += e - s
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

    A kernel counts where its launching call was made; a call on a thread with no user frame
    (autograd's backward thread, a DataLoader pin thread) counts where the analysed thread
    was at that moment (waiting in ``backward()``, say). Fills ``attr.findings``.
    """
    tls = attr.timelines
    if tls is None:
        return
    calls = {f"api:{c.id}": c for c in graph.api_calls}
    ops = {f"gpu:{o.id}": o for o in graph.gpu_ops}
    main = tls.thread(*attr.thread)
    for k, finding in enumerate(findings):
        ids = getattr(getattr(finding, "evidence", None), "node_ids", ()) or ()
        where: dict[tuple[Frame, str, Frame | None], list[float]] = defaultdict(lambda: [0, 0.0])
        steps = set(getattr(finding.evidence, "steps", ()) or ()) or {0}
        for node in ids:
            call = calls.get(node)
            if call is None and node in ops:
                call = graph.launcher(ops[node])
            if call is None:
                continue
            w = tls.thread(call.pid, call.tid).at(call.start_ns)
            if w is None or not w.path:
                w = main.at(call.start_ns)
            if w is None:
                continue
            acc = where[(w.frame, w.via, _caller(w))]
            acc[0] += 1
            acc[1] += call.duration_ns
        if where:
            attr.findings[k] = [
                LineCost(f, via, ns / len(steps), int(cnt), caller)
                for (f, via, caller), (cnt, ns)
                in sorted(where.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))]


__all__ = ["FlameNode", "LineCost", "PhasePart", "SourceAttribution", "Where", "attribute"]
