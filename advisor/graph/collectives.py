"""Which GPU work and host ranges are collective communication, and of which collective.

NCCL names its kernels after the collective: before NCCL 2.19 ``ncclKernel_AllReduce_RING_LL_Sum_float``,
since then ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` (and ``ncclDevKernel_SendRecv(...)`` for
point-to-point and all-to-all). Both are read here; tools that match only the old prefix (HTA's
straggler analysis) find no communication in current traces. PyTorch also marks each collective
on the host: ``record_function`` ranges ``nccl:all_reduce`` / ``c10d::allreduce_`` in
torch.profiler, and NCCL's own NVTX ranges (``ncclAllReduce``, ``ncclSend``) in nsys.

The interval helpers work on sorted, merged ``[start, end)`` lists: overlap of communication with
compute on one GPU is a set operation on time, nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from advisor.graph.kernels import KernelCategory, classify
from advisor.graph.model import GpuOp, GpuOpKind

_KERNEL_KIND = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)")
_HOST_KIND = (
    # (pattern over a lower-cased host range name, collective)
    (re.compile(r"all_?reduce|allreduce"), "AllReduce"),
    (re.compile(r"reduce_?scatter"), "ReduceScatter"),
    (re.compile(r"all_?gather"), "AllGather"),
    (re.compile(r"all_?to_?all|alltoall"), "AllToAll"),
    (re.compile(r"broadcast"), "Broadcast"),
    (re.compile(r"^nccl(?:send|recv)$|send_?recv|^nccl:(?:send|recv)|c10d::(?:send|recv)"), "SendRecv"),
    (re.compile(r"barrier"), "Barrier"),
    (re.compile(r"(?:^|[:_])reduce(?:_|$)"), "Reduce"),
)
_HOST_COLLECTIVE = re.compile(r"^(?:nccl:|c10d::|nccl(?=[A-Z])|record_param_comms)")


def is_communication(op: GpuOp) -> bool:
    return op.kind is GpuOpKind.KERNEL and classify(op) is KernelCategory.COMMUNICATION


@lru_cache(maxsize=4096)
def kernel_collective(name: str) -> str:
    """The collective a communication kernel runs: "AllReduce", "SendRecv" ... or "Other"."""
    m = _KERNEL_KIND.search(name)
    if m:
        kind = m.group(1)
        return {"Generic": "Other"}.get(kind, kind)
    low = name.lower()
    for pattern, kind in _HOST_KIND:
        if pattern.search(low):
            return kind
    return "Other"


REDUCER_RANGES = ("torch::distributed::reducer::", "torch.distributed.ddp.reducer::")
"""Ranges of DDP's reducer (copying gradients into buckets and back, scaling them) that run once
per bucket on autograd's thread: host work that comes with each all-reduce."""


@lru_cache(maxsize=4096)
def host_collective(name: str) -> str | None:
    """The collective a host range stands for (``nccl:all_reduce``, ``ncclAllReduce``), else None.

    Only ranges PyTorch or NCCL emit for a collective count: ``aten::gather`` is not one.
    """
    base = name.split(",")[0].strip()
    if not _HOST_COLLECTIVE.match(base):
        return None
    low = base.lower()
    if low in ("ncclgroupstart", "ncclgroupend", "ncclcommcount", "ncclcomminitrank"):
        return None
    for pattern, kind in _HOST_KIND:
        if pattern.search(low):
            return kind
    return None


# ----- interval arithmetic ----------------------------------------------------------------------

Interval = tuple[int, int]


def total(intervals: Iterable[Interval]) -> int:
    return sum(e - s for s, e in intervals)


def intersection_ns(a: list[Interval], b: list[Interval]) -> int:
    """Length of the overlap of two merged interval lists (a linear merge walk)."""
    i = j = 0
    t = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            t += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def clip(intervals: Iterable[Interval], lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]
