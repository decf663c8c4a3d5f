"""The op graph: one schema for what any trace says happened during training.

Every ingest module (Nsight Systems SQLite, torch.profiler Chrome trace) produces an `OpGraph`;
every rule and report reads only this. Keeping the schema in one file is what lets a rule written
against an nsys export also run on a Kineto trace.

Units and conventions
---------------------
* Times are ``int`` nanoseconds on the trace's own clock (``*_ns``); sizes are ``int`` bytes
  (``*_bytes``). Durations are derived, never stored twice.
* ``pid``/``tid`` are the operating system's ids. Correlation ids are only unique within a
  process, so every join uses ``(pid, correlation)``.
* ``id`` fields are unique within one graph and stable for one trace file, so findings can cite
  them as evidence.

Node kinds
----------
* `CpuRange`: a host interval that names work: NVTX ranges, ``record_function`` annotations,
  PyTorch operators (``aten::mm``), Python functions. Ranges on one thread nest.
* `ApiCall`: a CUDA runtime or driver call on a host thread (``cudaLaunchKernel``,
  ``cudaMemcpyAsync``, ``cudaStreamSynchronize`` ...).
* `GpuOp`: work on a device stream: a kernel, a copy, a memset, or a whole CUDA graph replay
  when the profiler traced graphs as one row.
* `SyncWait`: the GPU-side record of a host waiting on the device (CUPTI's SYNCHRONIZATION
  activity, Kineto's ``cuda_sync``).
* `Step`: one training iteration, with its phases.

Edge kinds (the lookups below answer them; the what-if replay, `advisor.engine.whatif`, is
the graph over them)
--------------------------------------------------------------------------------------------
* ``launch``: ApiCall -> GpuOp it enqueued (matched by ``(pid, correlation)``): `launcher`,
  `launched`.
* ``stream``: GpuOp -> the next GpuOp on the same ``(device, stream)``.
* ``sync``: GpuOp -> the ApiCall that waited for it to finish (`advisor.graph.syncs`).
* ``contains``: CpuRange -> ApiCall/CpuRange directly inside it on the same thread:
  `ranges_at`, `ranges_in`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property


class GpuOpKind(str, Enum):
    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    GRAPH = "graph"  # a CUDA graph replay traced as one row (nsys default graph tracing)


class RangeSource(str, Enum):
    NVTX = "nvtx"  # NVTX push/pop or start/end range (nsys)
    ANNOTATION = "annotation"  # torch.profiler record_function / ProfilerStep#N (Kineto)
    OPERATOR = "operator"  # a framework operator such as aten::mm (Kineto cpu_op)
    PYTHON = "python"  # a Python function (Kineto with_stack)


class ApiLayer(str, Enum):
    RUNTIME = "runtime"
    DRIVER = "driver"


class SyncKind(str, Enum):
    STREAM = "stream"  # cudaStreamSynchronize and blocking copies on a stream
    DEVICE = "device"  # cudaDeviceSynchronize / context synchronize
    EVENT = "event"  # cudaEventSynchronize
    STREAM_WAIT_EVENT = "stream_wait_event"  # device-side wait, the host does not block
    OTHER = "other"


SAMPLED = "advisor samples"
"""The `CpuRange.domain` of Python frames built from stack samples (`advisor.ingest.pystacks`):
their edges are estimates, so they may cross the thread's traced ranges. `ranges_at` and the
range tree leave them out (a crossing range would cut an enclosing phase or operator out of the
chain); `ranges_in` and the flat `ranges` list keep them."""

PHASES = ("data", "forward", "loss", "backward", "optimizer")
"""The phase names a step is split into, in the order they run."""


@dataclass(slots=True)
class CpuRange:
    id: int
    name: str
    start_ns: int
    end_ns: int
    pid: int
    tid: int
    source: RangeSource
    domain: str = ""
    # Operator inputs when the profiler recorded them (Kineto ``Input Dims``/``Input type``):
    # what lets a rule compute FLOPs and bytes instead of guessing them.
    shapes: tuple | None = None
    dtypes: tuple | None = None
    # Autograd's link between a forward operator and the backward of the node it created
    # (Kineto ``Sequence number`` / ``Fwd thread id``): a backward op carries the sequence
    # number of the forward op that built its node and a nonzero ``fwd_thread``; forward ops
    # carry ``fwd_thread`` 0. -1: not recorded.
    sequence: int = -1
    fwd_thread: int = -1
    # The scalar arguments of an attention operator (Kineto ``Concrete Inputs``), as text:
    # ``is_causal`` halves its FLOPs (`advisor.graph.flops`). None: not recorded or not kept.
    concrete: tuple[str, ...] | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class ApiCall:
    id: int
    name: str  # without CUPTI's version suffix: "cudaLaunchKernel", not "cudaLaunchKernel_v7000"
    start_ns: int
    end_ns: int
    pid: int
    tid: int
    correlation: int
    layer: ApiLayer = ApiLayer.RUNTIME

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class GpuOp:
    id: int
    kind: GpuOpKind
    name: str  # demangled kernel name; "Memcpy HtoD", "Memset" ... for the others
    start_ns: int
    end_ns: int
    device: int
    stream: int
    pid: int
    correlation: int | None
    bytes: int = 0  # copies and memsets
    copy_kind: str = ""  # "HtoD", "DtoH", "DtoD", "HtoH", "PtoP" for copies
    host_memory: str = ""  # "pageable" or "pinned" when a copy touches host memory
    graph_id: int | None = None  # set when the op ran as part of a CUDA graph replay
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class SyncWait:
    id: int
    kind: SyncKind
    start_ns: int
    end_ns: int
    pid: int
    tid: int | None
    correlation: int | None
    device: int | None = None
    stream: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class Step:
    """One training iteration on one host thread.

    The CPU interval is where the host was; the GPU interval is what the step took on the
    device (see `advisor.graph.projection`), which is the step time a user feels in steady
    state because the host usually runs ahead of the GPU.
    """

    index: int  # the trace's own step number where it has one, else the position
    name: str
    pid: int
    tid: int
    cpu_start_ns: int
    cpu_end_ns: int
    gpu_start_ns: int | None = None
    gpu_end_ns: int | None = None
    warmup: bool = False
    # phase name -> CPU intervals of that phase inside the step (a phase may occur twice)
    phases: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def cpu_ns(self) -> int:
        return self.cpu_end_ns - self.cpu_start_ns

    @property
    def gpu_ns(self) -> int | None:
        if self.gpu_start_ns is None or self.gpu_end_ns is None:
            return None
        return self.gpu_end_ns - self.gpu_start_ns

    @property
    def time_ns(self) -> int:
        """The step's time: on the GPU where it ran work there, else on the host."""
        gpu = self.gpu_ns
        return gpu if gpu is not None else self.cpu_ns


class StepSource(str, Enum):
    """Where the steps came from, as every report names it (JSON ``steps.source``): read from
    how they were found (`StepDetection.method`), never parsed back from a step's name."""

    RANGES = "ranges"  # the trace's own ranges (named like a step, or matching ``--steps``)
    LAUNCH_PATTERN = "launch pattern"  # inferred from the repeating kernel launch sequence
    NONE = "none"  # no steps


@dataclass(slots=True)
class StepDetection:
    """How the steps were found, so every report can say which steps and why those.

    ``method``: "step ranges" (ranges named like a step), "--steps pattern" (ranges matching
    the user's regular expression), "launch pattern" (inferred from the repeating kernel
    sequence) or "none". ``periodic``: for inferred steps, whether the host code repeats per
    step (`advisor.graph.steps.host_ranges_repeat`); None when nothing can tell.
    """

    method: str = "none"
    detail: str = ""
    periodic: bool | None = None
    period_note: str = ""  # why the pieces are not periods of the loop, when they are not
    pid: int | None = None  # the process the user asked for (``--pid``), None: chosen by advisor

    @property
    def source(self) -> StepSource:
        if self.method == "launch pattern":
            return StepSource.LAUNCH_PATTERN
        return StepSource.NONE if self.method == "none" else StepSource.RANGES


@dataclass(slots=True)
class GpuInfo:
    device: int
    name: str
    sm_count: int | None = None
    memory_bytes: int | None = None
    compute_capability: str | None = None


@dataclass(slots=True)
class TraceInfo:
    path: str
    format: str  # "nsys-sqlite" or "kineto-json"
    schema_version: str = ""
    tool_version: str = ""
    gpus: list[GpuInfo] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    software: dict[str, str] = field(default_factory=dict)  # "cuda": "12.4", "torch": ...
    # Whole-trace counts, aggregated at ingest so they stay right when only a window of the
    # trace is loaded in detail: "kernels", "api_calls", "nvtx_ranges", "memcpys" ...
    totals: dict[str, int] = field(default_factory=dict)
    # Where the detailed events cover the trace: [start, end) on the trace clock.
    window_ns: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)  # what the ingest could not read, plainly
    # The rank of a distributed job this trace records, from the trace's own metadata (Kineto's
    # ``distributedInfo``); None when the trace does not say (see `advisor.job.inputs`).
    rank: int | None = None
    world_size: int | None = None


class OpGraph:
    """All events of the analysis window plus the steps, with the indexes rules need.

    Lists are sorted by start time; the flat lists and the dictionaries below answer the
    questions rules ask (an object graph per event was the slow path and is gone).
    """

    def __init__(
        self,
        info: TraceInfo,
        ranges: list[CpuRange],
        api_calls: list[ApiCall],
        gpu_ops: list[GpuOp],
        syncs: list[SyncWait],
        steps: list[Step],
    ) -> None:
        self.info = info
        self.ranges = sorted(ranges, key=lambda r: (r.start_ns, -r.end_ns))
        self.api_calls = sorted(api_calls, key=lambda a: a.start_ns)
        self.gpu_ops = sorted(gpu_ops, key=lambda g: g.start_ns)
        self.syncs = sorted(syncs, key=lambda s: s.start_ns)
        self.steps = sorted(steps, key=lambda s: (s.pid, s.tid, s.cpu_start_ns))
        self.step_detection = StepDetection()
        # Kernel signature (name, grid, block) -> (GEMM sizes, kernel ns) of each problem a shape
        # probe saw it launched for (`advisor.graph.gemm_shapes`); empty unless the trace holds one.
        self.probe_gemm_sizes: dict[tuple, tuple[tuple[tuple[int, int, int], int], ...]] = {}

    @property
    def step_source(self) -> StepSource:
        """Where this graph's steps came from (`StepSource`)."""
        if not self.steps:
            return StepSource.NONE
        if self.step_detection.source is StepSource.LAUNCH_PATTERN:
            return StepSource.LAUNCH_PATTERN
        return StepSource.RANGES

    # ----- lookups -------------------------------------------------------------------------

    @cached_property
    def api_call_starts(self) -> list[int]:
        """Start times of `api_calls`, in their (start) order: for bisecting a time range."""
        return [a.start_ns for a in self.api_calls]

    @cached_property
    def api_by_correlation(self) -> dict[tuple[int, int], ApiCall]:
        """``(pid, correlation)`` -> the launching call: the process's first call with that id.

        Ids are unique per process in every real trace; a later call reusing one is a trace
        defect (counted in `duplicate_correlations`, noted by `advisor.graph.build`). It links
        no GPU work, so that every join over calls and their ops stays linear: with n calls and
        n ops sharing one id, linking each call to each op would be n * n."""
        out: dict[tuple[int, int], ApiCall] = {}
        for a in self.api_calls:
            out.setdefault((a.pid, a.correlation), a)
        return out

    @cached_property
    def duplicate_correlations(self) -> int:
        """Calls whose ``(pid, correlation)`` an earlier call of the process already has."""
        return len(self.api_calls) - len(self.api_by_correlation)

    @cached_property
    def ops_by_correlation(self) -> dict[tuple[int, int], list[GpuOp]]:
        out: dict[tuple[int, int], list[GpuOp]] = defaultdict(list)
        for op in self.gpu_ops:
            if op.correlation is not None:
                out[(op.pid, op.correlation)].append(op)
        return out

    @cached_property
    def launching_ops(self) -> dict[tuple[int, int], CpuRange | None]:
        """`advisor.graph.kernels.launching_op`'s answers so far, by launch (pid, correlation):
        built from the ranges, so dropped with them (`advisor.ingest.pystacks`)."""
        return {}

    def launcher(self, op: GpuOp) -> ApiCall | None:
        """The host call that enqueued this GPU op, if the trace has it."""
        if op.correlation is None:
            return None
        return self.api_by_correlation.get((op.pid, op.correlation))

    @cached_property
    def _first_correlation(self) -> dict[int, int]:
        first: dict[int, int] = {}
        for a in self.api_calls:
            first[a.pid] = min(first.get(a.pid, a.correlation), a.correlation)
        return first

    def launched_before_trace(self, op: GpuOp) -> bool:
        """An op with no traced launch whose correlation id precedes every traced call of its
        process: it was launched before tracing began (the GPU was running behind)."""
        if op.correlation is None or self.launcher(op) is not None:
            return False
        first = self._first_correlation.get(op.pid)
        return first is not None and op.correlation < first

    def launched(self, call: ApiCall) -> list[GpuOp]:
        """The GPU ops a host call enqueued (several for a graph launch traced per node); none
        for a call that reuses an earlier call's correlation id (`api_by_correlation`)."""
        key = (call.pid, call.correlation)
        if self.api_by_correlation.get(key) is not call:
            return []
        return self.ops_by_correlation.get(key, [])

    @cached_property
    def streams(self) -> dict[tuple[int, int], list[GpuOp]]:
        """(device, stream) -> its ops in start order."""
        out: dict[tuple[int, int], list[GpuOp]] = defaultdict(list)
        for op in self.gpu_ops:
            out[(op.device, op.stream)].append(op)
        return dict(out)

    @cached_property
    def _api_by_thread(self) -> dict[tuple[int, int], tuple[list[int], list[ApiCall]]]:
        out: dict[tuple[int, int], list[ApiCall]] = defaultdict(list)
        for a in self.api_calls:
            out[(a.pid, a.tid)].append(a)
        return {k: ([a.start_ns for a in v], v) for k, v in out.items()}

    @cached_property
    def _ranges_by_thread(self) -> dict[tuple[int, int], tuple[list[int], list[CpuRange]]]:
        out: dict[tuple[int, int], list[CpuRange]] = defaultdict(list)
        for r in self.ranges:
            out[(r.pid, r.tid)].append(r)
        return {k: ([r.start_ns for r in v], v) for k, v in out.items()}

    def api_calls_in(self, pid: int, tid: int, start_ns: int, end_ns: int) -> list[ApiCall]:
        """Calls made on one thread that start inside [start_ns, end_ns)."""
        starts, calls = self._api_by_thread.get((pid, tid), ([], []))
        return calls[bisect_left(starts, start_ns) : bisect_left(starts, end_ns)]

    @property
    def range_threads(self) -> list[tuple[int, int]]:
        """The (pid, tid) of every thread with ranges."""
        return list(self._ranges_by_thread)

    def ranges_in(self, pid: int, tid: int, start_ns: int, end_ns: int) -> list[CpuRange]:
        """Ranges on one thread that start inside [start_ns, end_ns)."""
        starts, ranges = self._ranges_by_thread.get((pid, tid), ([], []))
        return ranges[bisect_left(starts, start_ns) : bisect_left(starts, end_ns)]

    @cached_property
    def _range_parents(self) -> dict[tuple[int, int], list[int]]:
        """Per thread, the index of each range's nearest enclosing range (-1 for none)."""
        out: dict[tuple[int, int], list[int]] = {}
        for key, (_, ranges) in self._ranges_by_thread.items():
            parents, stack = [], []
            for i, r in enumerate(ranges):
                if r.domain == SAMPLED:  # never a parent: its parent is what is open at its start
                    j = len(stack) - 1
                    while j >= 0 and ranges[stack[j]].end_ns <= r.start_ns:
                        j -= 1
                    parents.append(stack[j] if j >= 0 else -1)
                    continue
                while stack and (ranges[stack[-1]].end_ns <= r.start_ns
                                 or ranges[stack[-1]].end_ns < r.end_ns):
                    stack.pop()  # ended before r, or overlaps r without enclosing it
                parents.append(stack[-1] if stack else -1)
                stack.append(i)
            out[key] = parents
        return out

    def ranges_at(self, pid: int, tid: int, t_ns: int) -> list[CpuRange]:
        """Ranges on one thread that enclose t_ns, outermost first.

        Ranges on a thread nest, so the enclosing ones are the last range starting at or
        before t and its ancestors: a walk up a parent chain instead of a scan."""
        starts, ranges = self._ranges_by_thread.get((pid, tid), ([], []))
        i = bisect_right(starts, t_ns) - 1
        parents = self._range_parents.get((pid, tid), [])
        found = []
        while i >= 0:
            if ranges[i].end_ns > t_ns and ranges[i].domain != SAMPLED:
                found.append(ranges[i])
            i = parents[i]
        return found[::-1]

    def range_tree(self, pid: int, tid: int) -> tuple[list[int], list[CpuRange], list[int]]:
        """One thread's ranges in start order, their starts, and each one's nearest enclosing
        range (-1: none): what `ranges_at` and `innermost_range_at` walk, for a caller that
        asks it of many instants of one thread (the step breakdown's idle stretches)."""
        starts, ranges = self._ranges_by_thread.get((pid, tid), ([], []))
        return starts, ranges, self._range_parents.get((pid, tid), [])

    def innermost_range_at(self, pid: int, tid: int, t_ns: int,
                           accept: Callable[[CpuRange], bool]) -> CpuRange | None:
        """The innermost range on one thread that encloses t_ns and that ``accept`` takes:
        ``[r for r in ranges_at(...) if accept(r)][-1]`` without building the list (the step
        breakdown asks it of every idle stretch)."""
        starts, ranges = self._ranges_by_thread.get((pid, tid), ([], []))
        i = bisect_right(starts, t_ns) - 1
        parents = self._range_parents.get((pid, tid), [])
        while i >= 0:
            r = ranges[i]
            if r.end_ns > t_ns and r.domain != SAMPLED and accept(r):
                return r
            i = parents[i]
        return None

    @cached_property
    def _op_starts(self) -> tuple[list[int], int]:
        return [o.start_ns for o in self.gpu_ops], max((o.duration_ns for o in self.gpu_ops), default=0)

    @cached_property
    def _call_starts(self) -> tuple[list[int], int]:
        return [c.start_ns for c in self.api_calls], max((c.duration_ns for c in self.api_calls),
                                                          default=0)

    def ops_overlapping(self, pid: int, start_ns: int, end_ns: int) -> list[GpuOp]:
        """GPU ops of a process that run during [start_ns, end_ns) (bisect, not a scan)."""
        starts, longest = self._op_starts
        lo, hi = bisect_left(starts, start_ns - longest), bisect_left(starts, end_ns)
        return [o for o in self.gpu_ops[lo:hi] if o.pid == pid and o.end_ns > start_ns]

    def calls_overlapping(self, pid: int, start_ns: int, end_ns: int) -> list[ApiCall]:
        """Host calls of a process (any thread) that run during [start_ns, end_ns)."""
        starts, longest = self._call_starts
        lo, hi = bisect_left(starts, start_ns - longest), bisect_left(starts, end_ns)
        return [c for c in self.api_calls[lo:hi] if c.pid == pid and c.end_ns > start_ns]

    def ops_launched_in(self, pid: int, tid: int, start_ns: int, end_ns: int) -> list[GpuOp]:
        """GPU ops enqueued by calls made on one thread inside [start_ns, end_ns)."""
        ops: list[GpuOp] = []
        for call in self.api_calls_in(pid, tid, start_ns, end_ns):
            ops.extend(self.launched(call))
        return ops

    def process_ops_launched_in(self, pid: int, start_ns: int, end_ns: int) -> list[GpuOp]:
        """GPU ops enqueued by calls made on any thread of one process inside [start_ns,
        end_ns): a step's kernels include those its autograd thread launches for the backward
        (on nanoGPT 2,618 of a step's 4,277), which `step_ops` (the step's own thread) leaves
        out."""
        ops: list[GpuOp] = []
        for (p, tid) in self._api_by_thread:
            if p == pid:
                ops.extend(self.ops_launched_in(pid, tid, start_ns, end_ns))
        return ops

    def step_ops(self, step: Step) -> list[GpuOp]:
        """The GPU work a step enqueued (what its host thread launched during the step)."""
        return self.ops_launched_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns)

    @cached_property
    def projector(self):  # -> advisor.graph.projection.Projector (imported lazily: it imports us)
        """Host time -> GPU time, built once per graph (see `advisor.graph.projection`)."""
        from advisor.graph.projection import Projector

        return Projector(self)

    @property
    def steady_steps(self) -> list[Step]:
        return [s for s in self.steps if not s.warmup]

    def kernels(self) -> Iterator[GpuOp]:
        return (op for op in self.gpu_ops if op.kind is GpuOpKind.KERNEL)

    @property
    def has_gpu_work(self) -> bool:
        return bool(self.gpu_ops)
