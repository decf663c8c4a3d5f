"""A whole-trace summary for traces without training steps, like ``nsys stats`` gives.

Without steps there is no step time to estimate against, but the loaded events still say where
the GPU time went: the top kernels, how busy each GPU was over the traced span, how long the
host sat in synchronizations, the copies, and the share of GPU time in communication kernels.
Figures are over the loaded window (``TraceInfo.window_ns``), which is the whole trace unless
it was too large to load in detail (the ingest notes say so).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from advisor.graph.api_names import is_sync
from advisor.graph.intervals import union_length
from advisor.graph.kernels import KernelCategory, classify, classify_name
from advisor.graph.model import GpuOpKind, OpGraph, SyncKind

TOP_KERNELS = 10


@dataclass(frozen=True)
class KernelTotal:
    name: str
    category: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class CopyTotal:
    kind: str  # "HtoD", "DtoH", ... or "memset"
    count: int
    bytes: int
    total_ns: int


@dataclass
class TraceSummary:
    span_ns: int  # first GPU op start to last GPU op end, over all devices
    busy_ns: int  # union of GPU op intervals, summed over devices
    devices: int
    kernels: int
    top_kernels: list[KernelTotal] = field(default_factory=list)
    category_ns: dict[str, int] = field(default_factory=dict)
    sync_calls: int = 0
    sync_ns: int = 0  # host time blocked in synchronizing calls
    copies: list[CopyTotal] = field(default_factory=list)
    communication_ns: int = 0

    @property
    def idle_ns(self) -> int:
        return max(0, self.span_ns * max(1, self.devices) - self.busy_ns)

    @property
    def busy_share(self) -> float | None:
        total = self.span_ns * max(1, self.devices)
        return self.busy_ns / total if total else None

    @property
    def gpu_ns(self) -> int:
        return sum(self.category_ns.values())

    @property
    def communication_share(self) -> float | None:
        """Communication kernels' share of all GPU op time."""
        return self.communication_ns / self.gpu_ns if self.gpu_ns else None


def summarize_trace(graph: OpGraph) -> TraceSummary:
    ops = graph.gpu_ops
    by_device: dict[int, list[tuple[int, int]]] = defaultdict(list)
    kernels: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    categories: dict[str, int] = defaultdict(int)
    copies: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    comm = 0
    n_kernels = 0
    for op in ops:
        by_device[op.device].append((op.start_ns, op.end_ns))
        category = classify(op)
        categories[category.value] += op.duration_ns
        if op.kind is GpuOpKind.KERNEL:
            n_kernels += 1
            k = kernels[op.name]
            k[0] += 1
            k[1] += op.duration_ns
            if category is KernelCategory.COMMUNICATION:
                comm += op.duration_ns
        elif op.kind in (GpuOpKind.MEMCPY, GpuOpKind.MEMSET):
            c = copies["memset" if op.kind is GpuOpKind.MEMSET else op.copy_kind or "copy"]
            c[0] += 1
            c[1] += op.bytes
            c[2] += op.duration_ns
    span = (max(o.end_ns for o in ops) - min(o.start_ns for o in ops)) if ops else 0
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:TOP_KERNELS]
    # Host time blocked: the synchronizing API calls, plus recorded waits with no such call.
    sync_calls = [c for c in graph.api_calls if is_sync(c.name)]
    waits = [w for w in graph.syncs if w.kind is not SyncKind.STREAM_WAIT_EVENT]
    sync_ns = sum(c.duration_ns for c in sync_calls) if sync_calls else sum(
        w.duration_ns for w in waits)
    return TraceSummary(
        span_ns=span,
        busy_ns=sum(union_length(iv)[0] for iv in by_device.values()),
        devices=len(by_device),
        kernels=n_kernels,
        top_kernels=[KernelTotal(name, classify_name(name).value, n, ns)
                     for name, (n, ns) in top],
        category_ns=dict(sorted(categories.items(), key=lambda kv: -kv[1])),
        sync_calls=len(sync_calls) or len(waits),
        sync_ns=sync_ns,
        copies=[CopyTotal(k, n, b, ns) for k, (n, b, ns) in
                sorted(copies.items(), key=lambda kv: -kv[1][2])],
        communication_ns=comm,
    )

