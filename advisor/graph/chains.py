"""Chains of eager memory-bound kernels between the compute kernels: what a compiler fuses.

In eager PyTorch every elementwise op, normalization, softmax, reduction and dtype cast is its
own ATen kernel that reads its inputs from memory and writes its output back. Between two
compute kernels (GEMM, convolution, fused attention, collective) on one stream, those kernels
form a chain; ``torch.compile`` (Inductor) turns each chain into one or a few Triton kernels
that read the chain's inputs once and write only what is needed later.

Which kernels count: ATen's own kernels (``at::native::``, and the CUB kernels ATen calls,
``at_cuda_detail::``) of the memory-bound categories. Library kernels (cuBLAS, cuDNN, NCCL,
flash attention) and custom extensions are not what Inductor replaces; the optimizer's
multi-tensor kernels run outside ``torch.compile(model)``. Inductor's own kernels
(``triton_poi_/per_/red_/tem_`` ...) mark a step that is already compiled.

What a fusion saves is the compiler-fusion rule's model (`advisor.rules.compiler_fusion`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from advisor.graph.kernels import KernelCategory, classify_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph, Step
from advisor.graph.queries import steps_ops, stream_sequences, within

MEMORY_BOUND = frozenset({KernelCategory.ELEMENTWISE, KernelCategory.NORM, KernelCategory.SOFTMAX,
                          KernelCategory.REDUCTION, KernelCategory.RNG, KernelCategory.OTHER})
_ATEN = re.compile(r"at::native::|at_cuda_detail::|\(anonymous namespace\)::(?:elementwise|reduce)")
INDUCTOR = re.compile(r"(?:^|\s)triton_(?:poi|per|red|tem|for|persistent|mix)_", re.I)
"""Inductor names its kernels triton_<kind>_fused_<ops>_<n>: poi(ntwise), per(sistent
reduction), red(uction), tem(plate GEMM). Hand-written Triton kernels are named by their author."""

OUTSIDE_MODEL_PHASES = ("data", "optimizer")
"""Phases whose kernels ``torch.compile(model)`` does not cover."""


def is_eager_memory_bound(op: GpuOp) -> bool:
    return op.kind is GpuOpKind.KERNEL and _eager_memory_bound_name(op.name)


def is_inductor(op: GpuOp) -> bool:
    return op.kind is GpuOpKind.KERNEL and _inductor_name(op.name)


# A window repeats few kernel names: each is read once (as `kernels.classify_name` is).
@lru_cache(maxsize=65536)
def _eager_memory_bound_name(name: str) -> bool:
    return (classify_name(name) in MEMORY_BOUND and bool(_ATEN.search(name))
            and not INDUCTOR.search(name))


@lru_cache(maxsize=65536)
def _inductor_name(name: str) -> bool:
    return bool(INDUCTOR.search(name))


@dataclass(frozen=True)
class Chains:
    """The eager memory-bound chains of the analysed steps."""

    chains: tuple[tuple[GpuOp, ...], ...]  # each in stream order, every chain of 1 or more
    inductor_ns: int  # time of Inductor-generated kernels in the steps
    steps: int
    bounds: tuple[tuple[GpuOp | None, GpuOp | None], ...] = ()  # the ops before and after each chain

    def next_to(self, ops: set[int]) -> list[tuple[GpuOp, ...]]:
        """The chains that follow or precede one of the ops (by id) on their stream."""
        return [c for c, (a, b) in zip(self.chains, self.bounds)
                if (a is not None and a.id in ops) or (b is not None and b.id in ops)]

    @property
    def fusable(self) -> list[tuple[GpuOp, ...]]:
        """Chains of two or more kernels: the ones a fusion changes."""
        return [c for c in self.chains if len(c) > 1]

    @property
    def eager_ns(self) -> int:
        return sum(o.duration_ns for c in self.chains for o in c)

    @property
    def fusable_ns(self) -> int:
        return sum(o.duration_ns for c in self.fusable for o in c)

    @property
    def compiled(self) -> bool:
        """Inductor kernels carry most of the memory-bound work: the model is compiled."""
        return self.inductor_ns > 0 and self.inductor_ns >= self.eager_ns


def find_chains(graph: OpGraph, steps: Sequence[Step]) -> Chains:
    """Maximal runs of eager memory-bound kernels per stream, cut by any other kernel or copy
    (memsets are transparent: they are the allocator's, not a data dependency)."""
    outside = [span for s in steps for p in OUTSIDE_MODEL_PHASES for span in s.phases.get(p, [])]
    # Kept on the graph (`Chains` is immutable): three rules ask it of the same steps.
    cache = graph.__dict__.setdefault("_chains", {})
    key = (steps[0].pid if steps else None, tuple((s.cpu_start_ns, s.cpu_end_ns) for s in steps),
           tuple(outside))
    found = cache.get(key)
    if found is None:
        found = cache[key] = _find_chains(graph, steps, outside)
    return found


def _find_chains(graph: OpGraph, steps: Sequence[Step], outside: list[tuple[int, int]]) -> Chains:
    chains: list[tuple[GpuOp, ...]] = []
    bounds: list[tuple[GpuOp | None, GpuOp | None]] = []
    inductor_ns = 0
    ops = steps_ops(graph, steps)
    in_outside = within(outside)
    for seq in stream_sequences(ops):
        cur: list[GpuOp] = []
        before: GpuOp | None = None
        for op in seq:
            if op.kind is GpuOpKind.MEMSET:
                continue
            member = is_eager_memory_bound(op)
            if member and outside:
                call = graph.launcher(op)
                member = call is None or not in_outside(call.start_ns)
            if member:
                cur.append(op)
                continue
            if is_inductor(op):
                inductor_ns += op.duration_ns
            if cur:
                chains.append(tuple(cur))
                bounds.append((before, op))
                cur = []
            before = op
        if cur:
            chains.append(tuple(cur))
            bounds.append((before, None))
    return Chains(tuple(chains), inductor_ns, len(steps), tuple(bounds))
