"""pageable-memcpy: host-device copies from pageable memory, or synchronous ones, in the step."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import OverlapOps, RemoveWaits, SetOpDurations
from advisor.engine.hardware import PINNED_H2D_BYTES_PER_NS
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Requirement,
    Rule,
    Status,
    Validation,
)
from advisor.graph import api_names
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import per_step, steps_ops
from advisor.graph.syncs import host_waits

MIN_PINNED_SAMPLE_BYTES = 1 << 20
SCALAR_READ_BYTES = 1 << 20
"""Device-to-host copies smaller than this are reads of values the host needs (``.item()``,
``.tolist()``): their cost is the sync, not the bandwidth, and `host-sync` reports them."""
"""Pinned copies at least this large in the trace itself tell the host's pinned bandwidth."""


def pinned_bandwidth(ops: Iterable[GpuOp]) -> float:
    """Bytes/ns of the trace's own large pinned host-to-device copies, or the H100 constant."""
    pinned = [o for o in ops if o.kind is GpuOpKind.MEMCPY and o.host_memory == "pinned"
              and o.copy_kind == "HtoD" and o.bytes >= MIN_PINNED_SAMPLE_BYTES and o.duration_ns > 0]
    if not pinned:
        return PINNED_H2D_BYTES_PER_NS
    return sum(o.bytes for o in pinned) / sum(o.duration_ns for o in pinned)


class PageableMemcpy(Rule):
    """Host-device copies in the step come from pageable memory or block the host.

    What it detects
    ---------------
    Copies between host and device inside steady-state steps whose host side is pageable
    (not pinned) memory, and synchronous copy calls (``cudaMemcpy`` rather than an async copy)
    that hold the host until the copy is done.

    Why it is slow
    --------------
    The driver cannot DMA from pageable memory: it stages the data through a pinned bounce buffer
    chunk by chunk, at a fraction of the link's bandwidth, and the call returns only when staging
    is done, so the host cannot enqueue anything meanwhile and the copy cannot overlap compute.

    Evidence
    --------
    Pageable/synchronous copies per step, bytes moved, their GPU time and achieved bandwidth.

    Example
    -------
    ```python
    x = torch.from_numpy(batch)          # pageable host memory
    x = x.cuda()                         # staged, blocking copy
    ```

    Speedup model
    -------------
    Replay of the analysed steps with each host-to-device copy at the pinned bandwidth (the
    trace's own pinned copies when it has some, else 25 GB/s on H100's PCIe Gen5 link), issued
    asynchronously on a side stream one step ahead: it leaves the critical path unless the step
    is shorter than the copies. Device-to-host copies get pinned bandwidth and stop blocking.
    Low bound: pinned but not prefetched (the copy stays on the compute stream).

    Known false positives
    ---------------------
    Small pageable copies (a few KB of indices) cost little and fall under the threshold.
    Device-to-host reads under 1 MiB are left to `host-sync`: their cost is the wait.

    References
    ----------
    NVIDIA, "How to Optimize Data Transfers in CUDA C/C++"; PyTorch pin_memory and
    non_blocking documentation.
    """

    code = "INPT002"
    name = "pageable-memcpy"
    validation = Validation(  # fixtures/scenarios-check
        {"tokens": 32768, "d": 512, "ff": 2048},
        measured=2.86, runs=3)
    category = Category.INPUT
    gate_signals = ("pageable-copies",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.COPIES)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "pageable-copies": "host-device copies from pageable (unpinned) memory or with a blocking "
                           "call: staged through a driver buffer at a fraction of the bus "
                           "bandwidth, and the host waits for each",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {"pageable-copies": ("loader:pin_memory=true",)}
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "pageable-copies",
            "Copy from pinned memory with non_blocking=True, prefetched on a side stream",
            "loader = DataLoader(ds, pin_memory=True, num_workers=4)   # pinned batches\n"
            "copy_stream = torch.cuda.Stream()\n"
            "with torch.cuda.stream(copy_stream):                       # prefetch the next batch\n"
            "    nxt = batch.cuda(non_blocking=True)\n"
            "torch.cuda.current_stream().wait_stream(copy_stream)\n"
            "nxt.record_stream(torch.cuda.current_stream())"),
        FixVariant(
            "pageable-copies",
            "Pin the Trainer's batches: TrainingArguments(dataloader_pin_memory=True), no host "
            "copies in the model",
            "args = TrainingArguments(..., dataloader_pin_memory=True,   # the Trainer copies\n"
            "                         dataloader_num_workers=4)           # with non_blocking\n"
            "# in forward/compute_loss: no tensor.cpu() / .numpy(); build tensors on the device",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "pageable-copies",
            "Return a pinned DataLoader from train_dataloader(); Lightning copies it non-blocking",
            "def train_dataloader(self):\n"
            "    return DataLoader(self.train_set, batch_size=self.batch_size,\n"
            "                      pin_memory=True, num_workers=4)\n"
            "# in training_step: no tensor.cpu() / .numpy(); create tensors with device=self.device",
            framework="lightning"),
    )
    model = "replay with copies at pinned bandwidth, asynchronous, prefetched on a side stream"
    assumptions = ("pinned host-to-device bandwidth $bandwidth GB/s",
                   "the batch for step N+1 is known during step N")
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        ops = steps_ops(graph, steps)
        bad = []
        for o in ops:
            if o.kind is not GpuOpKind.MEMCPY or o.copy_kind not in ("HtoD", "DtoH"):
                continue
            if o.copy_kind == "DtoH" and o.bytes < SCALAR_READ_BYTES:
                continue
            call = graph.launcher(o)
            sync_call = call is not None and call.name in api_names.COPY_CALLS_SYNC
            if o.host_memory == "pageable" or sync_call:
                bad.append(o)
        if not bad:
            return
        bw = pinned_bandwidth(graph.gpu_ops)
        h2d = [o for o in bad if o.copy_kind == "HtoD"]
        d2h = [o for o in bad if o.copy_kind == "DtoH"]
        pinned_ns = tuple((o.id, max(1, int(o.bytes / bw))) for o in bad)
        calls = tuple(c.id for c in (graph.launcher(o) for o in bad) if c is not None)
        total_bytes = sum(o.bytes for o in bad)
        total_ns = sum(o.duration_ns for o in bad)
        achieved = total_bytes / total_ns if total_ns else 0.0
        held = sum(w.wait_ns for w in host_waits(graph, [c for c in (graph.launcher(o) for o in bad) if c]))
        effects = [RemoveWaits(calls), SetOpDurations(pinned_ns)]
        if h2d:
            effects.append(OverlapOps(tuple(o.id for o in h2d)))
        yield ctx.finding(
            type(self),
            message=(f"{len(bad) / len(steps):.0f} pageable or synchronous copies per step move "
                     f"{per_step(total_bytes, steps) / 1e6:.2f} MB at {achieved:.1f} GB/s "
                     f"in {per_step(total_ns, steps) / 1e6:.2f} ms and hold the host "
                     f"{per_step(held, steps) / 1e6:.2f} ms"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                api_calls=tuple(sorted({c.name for c in (graph.launcher(o) for o in bad) if c})),
                node_ids=tuple(f"gpu:{o.id}" for o in bad[:50]),
                quantities={"copies_per_step": len(bad) / len(steps),
                            "copy_bytes_per_step": per_step(total_bytes, steps),
                            "copy_ns_per_step": per_step(total_ns, steps),
                            "host_wait_ns_per_step": per_step(held, steps),
                            "achieved_gb_per_s": achieved, "pinned_gb_per_s": bw,
                            "device_to_host_copies_per_step": len(d2h) / len(steps)},
            ),
            mechanism="pageable-copies",
            params={"bandwidth": f"{bw:.1f}"},
            effects=effects,
            low_effects=[RemoveWaits(calls), SetOpDurations(pinned_ns)],
        )
