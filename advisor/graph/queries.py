"""Questions rules ask of the analysed steps, answered once here so rules stay short."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence

from advisor.graph.intervals import merge
from advisor.graph.model import ApiCall, GpuOp, OpGraph, Step
from advisor.graph.phase_content import is_loss_range
from advisor.graph.steps import phase_of


def step_intervals(steps: Sequence[Step]) -> list[tuple[int, int]]:
    return [(s.cpu_start_ns, s.cpu_end_ns) for s in steps]


def process_calls(graph: OpGraph, steps: Sequence[Step],
                  predicate: Callable[[ApiCall], bool] | None = None) -> list[ApiCall]:
    """Host calls of the steps' process (every thread: autograd's backward thread launches too)
    made during the steps."""
    if not steps:
        return []
    calls = _steps_calls(graph, steps)
    return list(calls) if predicate is None else list(filter(predicate, calls))


def _steps_calls(graph: OpGraph, steps: Sequence[Step]) -> tuple[ApiCall, ...]:
    """`process_calls` without a predicate, kept on the graph: rules ask it of the same steps
    again and again, and each answer is a bisect into the calls plus a pass over the window."""
    pid = steps[0].pid
    spans = tuple(step_intervals(steps))
    cache = graph.__dict__.setdefault("_steps_calls", {})
    key = (pid, spans)
    if key in cache:
        return cache[key]
    starts = graph._call_starts[0]
    lo = bisect_left(starts, min(a for a, _ in spans))
    hi = bisect_left(starts, max(b for _, b in spans))
    if len(spans) == 1:  # one step (rules ask step by step): every call bisected to is inside it
        cache[key] = result = tuple(c for c in graph.api_calls[lo:hi] if c.pid == pid)
        return result
    out = []
    i = 0
    for c in graph.api_calls[lo:hi]:  # sorted by start
        if c.pid != pid:
            continue
        while i < len(spans) and spans[i][1] <= c.start_ns:
            i += 1
        if i == len(spans):
            break
        if spans[i][0] <= c.start_ns < spans[i][1]:
            out.append(c)
    cache[key] = result = tuple(out)
    return result


def step_of(steps: Sequence[Step], t_ns: int) -> Step | None:
    for s in steps:
        if s.cpu_start_ns <= t_ns < s.cpu_end_ns:
            return s
    return None


def launched_ops(graph: OpGraph, calls: Iterable[ApiCall]) -> list[GpuOp]:
    """`graph.launched` of each call, in order (the index read directly: a window's calls)."""
    out: list[GpuOp] = []
    launched, launcher = graph.ops_by_correlation.get, graph.api_by_correlation.get
    for c in calls:
        key = (c.pid, c.correlation)
        ops = launched(key)
        if ops and launcher(key) is c:  # a reused id links no ops (`OpGraph.launched`)
            out.extend(ops)
    return out


def steps_ops(graph: OpGraph, steps: Sequence[Step]) -> list[GpuOp]:
    """GPU ops launched during the steps by any thread of their process."""
    if not steps:
        return []
    cache = graph.__dict__.setdefault("_steps_ops", {})
    key = (steps[0].pid, tuple(step_intervals(steps)))
    if key not in cache:  # kept like `_steps_calls`: several rules ask for the same steps
        cache[key] = tuple(launched_ops(graph, _steps_calls(graph, steps)))
    return list(cache[key])


def phase_spans(steps: Sequence[Step], phase: str) -> list[tuple[int, int]]:
    return [span for s in steps for span in s.phases.get(phase, [])]


def loss_spans(graph: OpGraph, steps: Sequence[Step]) -> list[tuple[int, int]]:
    """Where the loss is computed: the ``loss`` phase, else the span of loss operators
    (``aten::nll_loss``, ``aten::mse_loss`` ...) in each step. A phase range is not a loss
    operator: a ``loss`` range the content showed to be data preparation
    (`advisor.graph.phase_content`) is the data phase, and no loss is found there. Nor is a
    framework's frame that merely names the loss (Lightning's ``automatic.py _clone_loss``
    after ``training_step`` returned, the HF Trainer's ``compute_loss`` around the whole
    forward): only loss code counts (`advisor.graph.phase_content.is_loss_range`)."""
    spans = phase_spans(steps, "loss")
    if spans:
        return spans
    out = []
    is_loss: dict[str, bool] = {}  # steps repeat their operators' names: each is read once
    for s in steps:
        loss_ranges = []
        for r in graph.ranges_in(s.pid, s.tid, s.cpu_start_ns, s.cpu_end_ns):
            hit = is_loss.get(r.name)
            if hit is None:
                hit = is_loss[r.name] = is_loss_range(r) and phase_of(r.name) is None
            if hit and r.name != s.name:
                loss_ranges.append(r)
        if loss_ranges:
            out.append((min(r.start_ns for r in loss_ranges), max(r.end_ns for r in loss_ranges)))
    return out


def inside(t_ns: int, spans: Sequence[tuple[int, int]]) -> bool:
    for a, b in spans:  # noqa: SIM110 - a plain loop is twice as fast; rules call this per call
        if a <= t_ns < b:
            return True
    return False


def within(spans: Iterable[tuple[int, int]]) -> Callable[[int], bool]:
    """``inside(t, spans)`` as a test to ask of many instants: the spans' union is merged
    once, then each question is one bisect instead of a walk over every span (rules ask it
    of every call in the window)."""
    merged: list[list[int]] = []
    for a, b in sorted((a, b) for a, b in spans if a < b):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [a for a, _ in merged]
    ends = [b for _, b in merged]

    def test(t_ns: int) -> bool:
        i = bisect_right(starts, t_ns) - 1
        return i >= 0 and t_ns < ends[i]

    return test


def per_step(total: float, steps: Sequence[Step]) -> float:
    return total / len(steps) if steps else 0.0


def step_indices(steps: Sequence[Step], times: Iterable[int]) -> tuple[int, ...]:
    found = []
    for t in times:
        s = step_of(steps, t)
        if s is not None and s.index not in found:
            found.append(s.index)
    return tuple(sorted(found))


def graphable_regions(steps: Sequence[Step]) -> list[tuple[int, int]]:
    """The host intervals a CUDA graph would replay: each step without its data phases.

    Loading the next batch stays outside the graph (it is copied into a static buffer), wherever
    the data phase sits in the step: the phases are the step's nested ranges, so every ``data``
    interval that overlaps the step is cut out, whether it opens the step, comes after a
    zero-grad or straddles the step's first instant by a clock tick."""
    out = []
    for s in steps:
        cuts = sorted((max(a, s.cpu_start_ns), min(b, s.cpu_end_ns))
                      for a, b in s.phases.get("data", []) if a < s.cpu_end_ns and b > s.cpu_start_ns)
        cur = s.cpu_start_ns
        for a, b in cuts:
            if a > cur:
                out.append((cur, a))
            cur = max(cur, b)
        if cur < s.cpu_end_ns:
            out.append((cur, s.cpu_end_ns))
    return out


COMPILED_GRAPH_CALLS = ("## Call CompiledFxGraph", "CompiledFunction", "Torch-Compiled Region")
"""Ranges torch.compile leaves around the code Inductor generated, most specific first: the call
of a compiled FX graph (forward, and backward on autograd's thread); else AOTAutograd's autograd
function around each graph (``CompiledFunction`` around the forward, ``CompiledFunctionBackward``
around the backward: torch 2.0, or a backend other than Inductor); else the region of the
compiled frame (forward only, guards and the eager code of a graph break included). The first
of these a trace holds stands for both passes: reduce-overhead records the backward graph as it
records the forward one."""

IN_GRAPH_COLLECTIVE = "c10d_functional::"
"""Ranges of the functional collectives a compiled graph calls itself (``_c10d_functional::
all_reduce``): part of the graph, captured with it, unlike those a hook fires."""


def compiled_regions(graph: OpGraph, steps: Sequence[Step]) -> list[tuple[int, int]]:
    """`compiled_capture`'s regions: what reduce-overhead would record as CUDA graphs."""
    return compiled_capture(graph, steps)[0]


def compiled_capture(graph: OpGraph, steps: Sequence[Step]
                     ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Host intervals inside the steps that run torch.compile's generated code: what
    ``mode="reduce-overhead"`` records as CUDA graphs (its graph trees capture each compiled
    graph, not the eager code around it: the optimizer step, gradient clipping, the loop).
    Empty when the steps run no compiled graph (or the trace does not mark them: an nsys export
    without torch.compile's ranges).

    An autograd function or frame range (every prefix but the graph call's) also holds what
    runs eagerly under it: collectives that DDP's reducer or an FSDP / user gradient hook fires
    from inside autograd's backward, with their host work, stay eager under reduce-overhead
    and keep their launches (`eager_collectives`, cut out here). Returned with the regions:
    those collectives' host spans (merged: one a collective, with its launch and ranges)."""
    threads: dict[int, list[int]] = {}  # pid -> its threads (backward runs on autograd's own)
    for pid, tid in graph.range_threads:
        threads.setdefault(pid, []).append(tid)
    for prefix in COMPILED_GRAPH_CALLS:
        found = []
        for s in steps:
            for tid in threads.get(s.pid, ()):
                for r in graph.ranges_in(s.pid, tid, s.cpu_start_ns, s.cpu_end_ns):
                    if r.name.startswith(prefix):
                        found.append((r.start_ns, r.end_ns))
        if not found:
            continue
        regions = merge(found)  # nested or overlapping calls: one region
        if prefix == COMPILED_GRAPH_CALLS[0]:
            return regions, []  # the graph calls themselves: a collective inside is the graph's
        pid = steps[0].pid
        out: list[tuple[int, int]] = []
        kept: list[tuple[int, int]] = []
        for a, b in regions:
            eager = eager_collectives(graph, pid, threads.get(pid, ()), a, b)
            out.extend(_around(a, b, eager, found) if eager else [(a, b)])
            kept.extend(eager)
        return out, kept
    return [], []


def eager_collectives(graph: OpGraph, pid: int, tids: Iterable[int], start_ns: int,
                      end_ns: int) -> list[tuple[int, int]]:
    """Host spans in [start_ns, end_ns) of the collectives the process runs eagerly, merged: a
    host collective range (``c10d::allreduce_``, ``nccl:all_reduce``, Gloo's ``gloo:...`` come
    as ``c10d::`` ranges too), a range of DDP's reducer (`REDUCER_RANGES`: its bucket copies),
    or the launch of a communication kernel (an nsys export without those ranges), on any of
    the process's threads; not those a compiled graph calls (`IN_GRAPH_COLLECTIVE`)."""
    from advisor.graph.collectives import REDUCER_RANGES, host_collective, is_communication

    spans, in_graph = [], []
    for tid in tids:
        for r in graph.ranges_in(pid, tid, start_ns, end_ns):
            if IN_GRAPH_COLLECTIVE in r.name:
                in_graph.append((r.start_ns, r.end_ns))
            elif host_collective(r.name) is not None or r.name.startswith(REDUCER_RANGES):
                spans.append((r.start_ns, min(r.end_ns, end_ns)))
    for c in graph.calls_overlapping(pid, start_ns, end_ns):
        if c.start_ns >= start_ns and any(is_communication(o) for o in graph.launched(c)):
            spans.append((c.start_ns, min(c.end_ns, end_ns)))
    if in_graph:
        graph_owned = within(in_graph)
        spans = [(a, b) for a, b in spans if not graph_owned(a)]
    return merge(spans)


def _around(start_ns: int, end_ns: int, eager: list[tuple[int, int]],
            calls: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A compiled region without the stretch of its eager collectives (`eager_collectives`,
    merged, not empty). A compiled graph runs as one host call that no hook interrupts, so the
    collectives nested in the range around it fire in a burst from hooks before or after it
    (DDP's reducer, bucket by bucket, as the gradients come): from the first collective to the
    end of the last, with the host work between them (bucket copies, a hook's clone), the
    region runs eagerly. Before and after that stretch it is the graph's, and so is any
    compiled call of its own (``calls``: the ranges the region was made of) between two of the
    collectives."""
    first, last = eager[0][0], eager[-1][1]
    out = [(start_ns, first)] if first > start_ns else []
    starts = [a for a, _ in eager]
    for a, b in calls:
        if first <= a and b <= last:
            i = bisect_right(starts, a) - 1  # the last collective starting at or before a
            if eager[i][1] <= a and (i + 1 == len(eager) or b <= eager[i + 1][0]):
                out.append((a, b))
    if last < end_ns:
        out.append((last, end_ns))
    return merge(out)


def uses_cuda_graphs(graph: OpGraph, steps: Sequence[Step]) -> bool:
    """True when the steps already replay CUDA graphs (kept on the graph like `_steps_calls`:
    several rules ask it of the same steps)."""
    from advisor.graph import api_names
    from advisor.graph.model import GpuOpKind

    if not steps:
        return False
    cache = graph.__dict__.setdefault("_uses_cuda_graphs", {})
    key = (steps[0].pid, tuple(step_intervals(steps)))
    found = cache.get(key)
    if found is None:
        names = {c.name for c in _steps_calls(graph, steps)}  # a window repeats a few names
        found = cache[key] = (not names.isdisjoint(api_names.GRAPH_LAUNCH_CALLS)) or any(
            o.kind is GpuOpKind.GRAPH or o.graph_id is not None for o in steps_ops(graph, steps))
    return found


def stream_sequences(ops: Iterable[GpuOp]) -> list[list[GpuOp]]:
    """Ops grouped per (device, stream), each list in execution order."""
    by_stream: dict[tuple[int, int], list[GpuOp]] = {}
    for o in ops:
        by_stream.setdefault((o.device, o.stream), []).append(o)
    return [sorted(v, key=lambda o: o.start_ns) for v in by_stream.values()]


def op_share(ops: Iterable[GpuOp], steps: Sequence[Step]) -> float:
    """Summed duration of ``ops`` as a share of the steps' time."""
    total = sum(s.time_ns for s in steps)
    return sum(o.duration_ns for o in ops) / total if total else 0.0
