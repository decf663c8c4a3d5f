"""cpu-bound-loss: the loss runs on the host's schedule, and the GPU waits for it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import CaptureGraph, DropOps, RemoveWaits
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Requirement,
    Rule,
    Validation,
)
from advisor.graph import api_names
from advisor.graph.intervals import union_length
from advisor.graph.kernels import KernelCategory, classify, short_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.phase_content import has_loss_code
from advisor.graph.queries import (
    graphable_regions,
    launched_ops,
    loss_spans,
    per_step,
    process_calls,
    step_of,
    within,
)
from advisor.graph.syncs import host_waits

MIN_LOSS_IDLE_SHARE = 0.10
"""The GPU must sit idle inside the loss for at least this share of the step before the loss's
host work is worth a finding of its own (below it, `host-sync` and `uncaptured-cuda-graph` cover
the rest)."""

HOST_BOUND_IDLE = 0.5
"""Without a host sync inside the loss, its idle must be at least this share of the loss's GPU
time: only then did the GPU wait for the host's per-sample work rather than run the loss."""


def _idle_in(graph: OpGraph, pid: int, windows: list[tuple[int, int]]) -> int:
    """GPU time inside the windows (GPU clock) with no op of the process running."""
    idle = 0
    for ga, gb in windows:
        if gb <= ga:
            continue
        busy, _ = union_length((max(ga, o.start_ns), min(gb, o.end_ns))
                               for o in graph.ops_overlapping(pid, ga, gb))
        idle += (gb - ga) - busy
    return idle


def _loss_backward_kernels(graph: OpGraph, steps: list) -> list[GpuOp]:
    out: list[GpuOp] = []
    for s in steps:
        spans = s.phases.get("backward", [])
        in_backward = within(spans)
        calls = process_calls(graph, [s], lambda c, test=in_backward: test(c.start_ns))
        for o in launched_ops(graph, calls):
            if classify(o) in (KernelCategory.GEMM, KernelCategory.CONV):
                break
            if o.kind is GpuOpKind.KERNEL:
                out.append(o)
    return out


class CpuBoundLoss(Rule):
    """The loss is computed with host round trips, so the GPU idles between forward and backward.

    What it detects
    ---------------
    A loss (the ``loss`` phase, or the loss operators when phases are not marked) that holds
    loss code (a loss operator, module or function; a ``loss`` phase cut by position that turns
    out to be data preparation is the data phase, `loader-jitter`'s) inside which
    the GPU sits idle for at least 10% of the step because the host holds it back: host syncs
    inside it that waited (``.item()``, ``.cpu()``, ``.tolist()``, data-dependent branches), or,
    without syncs, GPU idle of at least half the loss's GPU time (a per-sample Python loop that
    launches small kernels one at a time). A long loss the GPU runs back to back is not flagged.

    Why it is slow
    --------------
    Each round trip drains the GPU queue; the host then runs Python per sample and launches tiny
    kernels one at a time. The GPU, which just ran a fast forward pass, waits for the host. In
    MLPerf Mask R-CNN the loss took over 40% of the step this way.

    Evidence
    --------
    The loss's GPU-projected time per step, its syncs, its kernels per step and how often the
    same kernel repeats (the per-sample loop).

    Example
    -------
    ```python
    loss = 0
    for i in range(batch):                       # per-sample Python loop
        if targets[i].sum().item() > 0:          # host round trip per sample
            loss = loss + box_loss(pred[i], targets[i])
    ```

    Speedup model
    -------------
    Replay of the analysed steps with the MLPerf fix applied: the loss's host waits removed, the
    per-sample loop vectorized (each distinct kernel of the loss, and of the loss's backward,
    runs once per step instead of once per sample: small kernels cost about the same for one
    sample or a batch), and the step after its data phase captured as one CUDA graph. Low bound:
    the loop's kernels all kept (only syncs removed and the step graphed).

    Known false positives
    ---------------------
    A loss that genuinely needs host decisions per step (dynamic matching on the CPU) can only
    move that work off the critical path, not remove it.

    References
    ----------
    NVIDIA MLPerf Training v1.0/v2.0 Mask R-CNN (vectorized loss, full-model CUDA graph: +30%);
    ``torch.cuda.set_sync_debug_mode``.
    """

    code = "HOST002"
    name = "cpu-bound-loss"
    validation = Validation(  # fixtures/scenarios-check
        {"batch": 8, "anchors": 2048, "d": 768, "ff": 1536, "depth": 24},
        measured=1.38, runs=3)
    category = Category.HOST
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.LAUNCHES)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "per-sample-loop": "the loss loops over samples in Python, launching the same small "
                           "kernels once per sample (and syncing to decide what to do next)",
        "loss-syncs": "the loss moves values to the host (.item(), .cpu(), .tolist(), boolean "
                      "masks) and the GPU waits for the host's next decision",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "per-sample-loop",
            "Vectorize the per-sample loss loop over the batch without host syncs, then capture "
            "the step in a CUDA graph",
            "mask = targets.sum(dim=1) > 0                # stays on the GPU\n"
            "per_sample = box_loss(pred, targets, reduction=\"none\").sum(dim=1)\n"
            "loss = (per_sample * mask).sum() / mask.sum().clamp(min=1)\n"
            "# then: torch.cuda.graph / make_graphed_callables over the whole step"),
        FixVariant(
            "loss-syncs",
            "Keep the loss's decisions on the GPU (no .item()/.cpu() in the loss), then capture "
            "the step in a CUDA graph",
            "valid = targets >= 0                          # a GPU mask, not a host list\n"
            "loss = torch.where(valid, loss_fn(pred, targets.clamp(min=0), reduction=\"none\"),\n"
            "                   0).sum() / valid.sum().clamp(min=1)\n"
            "# no loss.item() / tensor.cpu() / if tensor: ... inside the step"),
        FixVariant(
            "per-sample-loop",
            "Vectorize the per-sample loop of compute_loss over the batch without host syncs",
            "class MyTrainer(Trainer):\n"
            "    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):\n"
            "        out = model(**inputs)\n"
            "        per_sample = loss_fn(out.logits, inputs[\"labels\"], reduction=\"none\")\n"
            "        mask = inputs[\"labels\"].ne(-100)            # on the GPU, no .item()\n"
            "        loss = (per_sample * mask).sum() / mask.sum().clamp(min=1)\n"
            "        return (loss, out) if return_outputs else loss",
            framework="hf-trainer"),
    )
    model = ("replay with the loss's syncs removed, its per-sample kernels collapsed to one "
             "launch per distinct kernel, and the step captured as one CUDA graph")
    assumptions = ("a vectorized kernel over the batch costs about one per-sample kernel",
                   "the step can be captured once the loss is static")
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        spans = loss_spans(graph, steps)
        if not spans or not has_loss_code(graph, steps, spans):
            return  # between forward and backward, but no loss runs there (data preparation)
        projector = graph.projector
        pid = steps[0].pid
        windows = [(projector.gpu_time(pid, a), projector.gpu_time(pid, b)) for a, b in spans]
        loss_gpu = sum(b - a for a, b in windows)
        step_total = sum(s.time_ns for s in steps)
        share = loss_gpu / step_total if step_total else 0.0
        in_loss = within(spans)
        calls = process_calls(graph, steps, lambda c: in_loss(c.start_ns))
        waits = host_waits(graph, [c for c in calls if api_names.may_block(c.name)])
        kernels = [o for o in launched_ops(graph, calls) if o.kind is GpuOpKind.KERNEL]
        # The mechanism: the GPU idles inside the loss because the host is busy there (syncs,
        # per-sample Python). A loss the GPU runs back to back (an HF ``compute_loss`` range that
        # holds the whole forward pass, say) is not host-bound however long it is.
        idle = _idle_in(graph, pid, windows)
        idle_share = idle / step_total if step_total else 0.0
        host_bound = bool(waits) or (loss_gpu > 0 and idle >= HOST_BOUND_IDLE * loss_gpu)
        if idle_share < MIN_LOSS_IDLE_SHARE or not host_bound:
            return
        kernel_busy = sum(o.duration_ns for o in kernels)
        # The per-sample loop: per step, every launch of a kernel name after its first, in the
        # loss and in the loss's own backward (reverse mode runs it first: the backward
        # kernels launched before the model's first GEMM or convolution).
        loss_backward = _loss_backward_kernels(graph, steps)
        seen: set[tuple[int, str, str]] = set()
        repeats = []
        for part, ops in (("loss", kernels), ("backward", loss_backward)):
            for o in ops:
                call = graph.launcher(o)
                s = step_of(steps, call.start_ns) if call else None
                key = (s.index if s else -1, part, o.name)
                if key in seen:
                    repeats.append(o)
                else:
                    seen.add(key)
        counts = Counter(short_name(o.name) for o in kernels)
        regions = graphable_regions(steps)
        all_waits = host_waits(graph, process_calls(graph, steps, lambda c: api_names.may_block(c.name)))
        unwait_all = RemoveWaits(tuple(w.call.id for w in all_waits))
        capture = CaptureGraph(tuple(regions))
        vectorize = DropOps(tuple(o.id for o in repeats))
        n = len(steps)
        yield ctx.finding(
            type(self),
            message=(f"the loss holds {share:.0%} of the step ({per_step(loss_gpu, steps) / 1e6:.2f} ms) "
                     f"and the GPU idles {per_step(idle, steps) / 1e6:.2f} ms of it "
                     f"({idle_share:.0%} of the step) waiting for the host: "
                     f"{len(waits) / n:.0f} host syncs and {len(kernels) / n:.0f} kernels per step"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(k for k, _ in counts.most_common(5)),
                ranges=("loss",),
                api_calls=tuple(sorted({w.call.name for w in waits})),
                node_ids=tuple(f"api:{w.call.id}" for w in waits[:50]),
                quantities={
                    "loss_gpu_ns_per_step": per_step(loss_gpu, steps),
                    "loss_share": share,
                    "loss_gpu_idle_ns_per_step": per_step(idle, steps),
                    "loss_gpu_idle_share": idle_share,
                    "loss_kernel_ns_per_step": per_step(kernel_busy, steps),
                    "loss_syncs_per_step": len(waits) / n,
                    "loss_kernels_per_step": len(kernels) / n,
                    "repeated_kernels_per_step": len(repeats) / n,
                },
            ),
            mechanism="per-sample-loop" if repeats else "loss-syncs",
            effects=[unwait_all, vectorize, capture] if repeats else [unwait_all, capture],
            low_effects=[unwait_all, capture],
        )
