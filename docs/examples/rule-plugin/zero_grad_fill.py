"""zero-grad-fill: ``optimizer.zero_grad()`` writes zeros into every gradient, one kernel each.

The template rule of docs/writing-a-rule.md: a complete, working plugin a team copies to start its
own. It is not one of advisor's built-in rules (it has not been through the H100 validation of
docs/validation.md): its status is preview and its confidence heuristic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import DropOps, ScaleHostWork, SetCallDurations
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Option,
    Requirement,
    Rule,
    Status,
)
from advisor.graph.kernels import short_name
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import per_step

ZERO_GRAD = "zero_grad"
"""torch.profiler records ``Optimizer.zero_grad#<Optimizer>.zero_grad`` around every call (any
``record_function`` or NVTX range whose name contains this matches too)."""


def is_fill(op: GpuOp) -> bool:
    """A kernel or memset that only writes a constant: what ``Tensor.zero_()`` launches."""
    return op.kind is GpuOpKind.MEMSET or "fill" in op.name.lower()


class ZeroGradFill(Rule):
    """``optimizer.zero_grad()`` zeroes every gradient with its own kernel instead of dropping it.

    What it detects
    ---------------
    ``zero_grad`` ranges in steady-state steps that launch fill kernels (or memsets) on the GPU:
    the optimizer (or ``model.zero_grad``) was called with ``set_to_none=False``, or a PyTorch
    older than 2.0 (where that was the default) wrote zeros into each gradient tensor.

    Why it is slow
    --------------
    Each parameter tensor costs one host call to ``zero_()`` and one kernel launch: hundreds per
    step for a large model, on the host thread that should be launching the forward pass. The
    zeros themselves are useless: the next backward pass can write the gradients instead of
    accumulating into them when they are ``None``.

    Evidence
    --------
    The fill kernels per step launched from ``zero_grad``, their GPU time, and the host time of
    the ``zero_grad`` ranges.

    Example
    -------
    ```python
    optimizer.zero_grad(set_to_none=False)   # or any call on torch < 2.0
    ```

    Speedup model
    -------------
    Replay of the steps with the fill kernels and their launch calls removed and the host time
    left in ``zero_grad`` scaled to `host-share` of what it was (a Python loop setting
    ``.grad = None``); the low end keeps half the host time, the high end none.

    Known false positives
    ---------------------
    Code that reads ``.grad`` of a parameter that got no gradient in the step, expecting zeros:
    with ``set_to_none=True`` it gets ``None``.

    References
    ----------
    PyTorch docs, ``torch.optim.Optimizer.zero_grad`` (``set_to_none``); PyTorch performance
    tuning guide, "Use parameter.grad = None instead of model.zero_grad()".
    """

    code = "OPTM101"
    name = "zero-grad-fill"
    category = Category.HOST
    status = Status.PREVIEW
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.LAUNCHES)
    options: ClassVar[Mapping[str, Option]] = {
        "host-share": Option(0.1, "share of the zero_grad host time left after the fix (the "
                                  "Python loop over the parameters that sets .grad to None)"),
    }
    # Declared once: the engine assembles findings and docs ("Use instead") from these.
    mechanisms: ClassVar[Mapping[str, str]] = {
        "fill-kernels": "zero_grad writes zeros into every gradient with one kernel per tensor",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant("fill-kernels", "Drop the gradients instead of zeroing them",
                   "optimizer.zero_grad(set_to_none=True)    # the default since PyTorch 2.0"),
        FixVariant("fill-kernels", "Drop the gradients instead of zeroing them: "
                   "LightningModule.optimizer_zero_grad with set_to_none=True",
                   "def optimizer_zero_grad(self, epoch, batch_idx, optimizer):\n"
                   "    optimizer.zero_grad(set_to_none=True)",
                   framework="lightning"),
    )
    model = "replay without the fill kernels and their launches, zero_grad's host time scaled to host-share"
    assumptions = ("no code reads a gradient that the step left unset",)
    confidence = Confidence.HEURISTIC

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        # (thread, start, end) of every zero_grad range in the analysed steps, on the step's thread
        spans = [((s.pid, s.tid), r.start_ns, r.end_ns) for s in steps
                 for r in graph.ranges_in(s.pid, s.tid, s.cpu_start_ns, s.cpu_end_ns)
                 if ZERO_GRAD in r.name.lower()]
        fills = [op for thread, a, b in spans for op in graph.ops_launched_in(*thread, a, b)
                 if is_fill(op)]
        if not fills:
            return
        launches = [call for op in fills if (call := graph.launcher(op)) is not None]
        host_ns = sum(b - a for _, a, b in spans)
        intervals = tuple((a, b) for _, a, b in spans)
        share = float(self.option(ctx, "host-share"))
        remove = [DropOps(tuple(op.id for op in fills)),
                  SetCallDurations(tuple((c.id, 0) for c in launches))]
        names = sorted({short_name(op.name) for op in fills})
        yield ctx.finding(
            type(self),
            message=(f"zero_grad launches {per_step(len(fills), steps):.0f} fill kernels per step "
                     f"and holds the host {per_step(host_ns, steps) / 1e6:.2f} ms per step"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                kernels=tuple(names[:5]),
                ranges=(ZERO_GRAD,),
                node_ids=tuple(f"gpu:{op.id}" for op in fills[:50]),
                quantities={
                    "fill_kernels_per_step": per_step(len(fills), steps),
                    "fill_gpu_ns_per_step": per_step(sum(op.duration_ns for op in fills), steps),
                    "zero_grad_host_ns_per_step": per_step(host_ns, steps),
                },
            ),
            mechanism="fill-kernels",
            effects=[*remove, ScaleHostWork(intervals, share)],
            low_effects=[*remove, ScaleHostWork(intervals, max(share, 0.5))],
            high_effects=[*remove, ScaleHostWork(intervals, 0.0)],
        )
