"""uncaptured-cuda-graph: a launch-bound step that does not replay a CUDA graph."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import CaptureGraph, RemoveWaits
from advisor.engine.framework import TRITON_KERNEL
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
from advisor.engine.whatif import GRAPH_LAUNCH_NS, GRAPH_NODE_GAP_NS, LONG_HOST_WORK_NS
from advisor.graph import api_names
from advisor.graph.model import GpuOp, GpuOpKind, OpGraph
from advisor.graph.queries import (
    compiled_capture,
    graphable_regions,
    per_step,
    process_calls,
    steps_ops,
    uses_cuda_graphs,
)
from advisor.graph.syncs import host_waits

MIN_STEADY_STEPS = 3
"""A replay of one or two steps cannot tell the steady step from one-off costs (first-call
allocation, autotuning, lazy module loading); capture is judged on at least this many."""

MIN_LAUNCH_IDLE_SHARE = 0.10
"""The GPU must idle in launch gaps for at least this share of the step: below it, launches
are not what holds the step back."""

SHORT_KERNEL_NS = 20_000
"""Kernels shorter than this take about as long as the host needs to launch one (5-20 µs per
launch through PyTorch's eager dispatch): a step made of them cannot keep the GPU busy."""


def launch_gap_idle(graph: OpGraph, ops: list[GpuOp]) -> int:
    """GPU idle made of launch gaps: time the device had nothing to run because the next op's
    launch had not been issued yet, in gaps shorter than `LONG_HOST_WORK_NS` (a longer one is
    host computation, data loading or a wait, which a graph does not remove)."""
    idle, busy_until = 0, None
    for o in sorted(ops, key=lambda o: o.start_ns):
        if busy_until is not None and o.start_ns > busy_until:
            call = graph.launcher(o)
            gap = o.start_ns - busy_until
            if call is not None and call.start_ns >= busy_until and gap < LONG_HOST_WORK_NS:
                idle += gap
        busy_until = o.end_ns if busy_until is None else max(busy_until, o.end_ns)
    return idle


def graphs_available(graph: OpGraph) -> bool:
    """CUDA graphs need an NVIDIA GPU of compute capability 3.5 or later (every GPU PyTorch
    supports); AMD GPUs have HIP graphs. A trace that names no GPU is given the benefit."""
    for gpu in graph.info.gpus:
        cc = gpu.compute_capability
        if cc and "AMD" not in gpu.name.upper() and "RADEON" not in gpu.name.upper():
            try:
                major, minor = (int(x) for x in cc.split(".")[:2])
            except ValueError:
                continue
            if (major, minor) < (3, 5):
                return False
    return True


# The frameworks' knobs for CUDA graphs, the same whether the step is compiled already or not.
_HF_GRAPHS = ("args = TrainingArguments(..., torch_compile=True,\n"
              "                         torch_compile_mode=\"reduce-overhead\")  # CUDA graphs")
_LIGHTNING_GRAPHS = ("model = torch.compile(model, mode=\"reduce-overhead\")   # the LightningModule\n"
                     "trainer.fit(model, datamodule=dm)")
_ACCELERATE_GRAPHS = ("from accelerate.utils import TorchDynamoPlugin\n"
                      "accelerator = Accelerator(dynamo_plugin=TorchDynamoPlugin(backend=\"inductor\",\n"
                      "                                                          mode=\"reduce-overhead\"))")


class UncapturedCudaGraph(Rule):
    """A launch-bound step runs eagerly instead of replaying a CUDA graph.

    What it detects
    ---------------
    Steady-state steps (at least 3) made of many short kernels where the GPU sits idle between
    them while the host launches the next one (launch gaps: the next launch issued after the GPU
    ran dry, in gaps under 1 ms, at least 10% of the step), on a GPU with CUDA graphs (NVIDIA
    compute capability 3.5+, or HIP graphs on AMD), and no CUDA graph is replayed (no
    ``cudaGraphLaunch``, no graph kernels). Idle spent in host computation, data loading or
    syncs is not a launch gap.

    Why it is slow
    --------------
    Each eager kernel costs the host 5-20 µs of Python, dispatcher and ``cudaLaunchKernel`` work.
    When kernels run for less than that, the GPU finishes each one before the next is enqueued:
    the step takes as long as the host needs to launch it. A CUDA graph replays the whole
    recorded sequence with one launch; kernels then follow each other about a microsecond apart.

    Evidence
    --------
    Kernels and launches per step, median kernel duration, GPU idle share of the step.

    Example
    -------
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)   # hundreds of small kernels, launched one by one
        loss.backward()
        opt.step(); opt.zero_grad()
    ```

    Speedup model
    -------------
    Replay of the analysed steps with each step (without its data phases, wherever they nest)
    captured as one graph: the host pays one ``cudaGraphLaunch`` (10 µs, measured) instead of its
    per-kernel launch and dispatch work; host-to-device input copies, CPU operators (50 µs or
    more without a launch) and host stretches over 1 ms stay; kernels on a stream follow their
    predecessor after the graph node gap (1 µs, measured on H100); host waits inside the step
    are removed, as capture requires. Bounds: node gap and launch cost doubled (low) or halved (high).
    A step that already runs torch.compile's graphs (``## Call CompiledFxGraph`` ranges, forward
    and backward) is replayed with only those calls captured, one graph each: that is what
    ``mode="reduce-overhead"`` records, and the eager code around them (the optimizer step,
    gradient clipping, the Trainer's loop) stays as it is. On HF run_clm.py (GPT-2 bf16, compile)
    reduce-overhead measured 1.05x on the H100 where a whole-step capture had been estimated.
    Without those calls' ranges (torch 2.0, a backend other than Inductor) the ``CompiledFunction``
    and ``CompiledFunctionBackward`` ranges stand in, forward and backward. Collectives that DDP's
    reducer or a gradient hook fires from inside such a range (``nccl:all_reduce`` launched by
    autograd's hooks, not by the compiled graph) are not captured: from the first to the last of
    them, with the host work between them (bucket copies), the range is replayed eagerly.

    Known false positives
    ---------------------
    Steps with dynamic shapes or CPU-side control flow cannot be captured whole; capture the
    static part (``make_graphed_callables``) and expect part of the gain.

    References
    ----------
    PyTorch blog, "Accelerating PyTorch with CUDA Graphs" (2021); MLPerf Training v1.0 NVIDIA
    submission (Mask R-CNN, BERT: whole-step graphs).
    """

    code = "HOST003"
    name = "uncaptured-cuda-graph"
    validation = Validation(  # fixtures/scenarios-check
        {"batch": 128, "width": 768, "depth": 24},
        measured=2.16, runs=3)
    category = Category.HOST
    gate_signals = ("graph-replays",)
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    requires = (Requirement.STEPS, Requirement.GPU_WORK, Requirement.LAUNCHES)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "launch-bound": "the host launches kernels one by one and the GPU runs each faster than "
                        "the next launch arrives; first make the step static (no host syncs, "
                        "fixed shapes, no data-dependent control flow, no allocation that changes "
                        "address between steps)",
        "launch-bound-compiled": "the step runs torch.compile's graphs, but their kernels are "
                                 "still launched one by one; mode=\"reduce-overhead\" replays each "
                                 "compiled graph as a CUDA graph (the eager code between them, "
                                 "such as the optimizer step, stays as it is)",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "launch-bound": ("compile:mode=reduce-overhead",),
        "launch-bound-compiled": ("compile:mode=reduce-overhead",),
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "launch-bound",
            "Capture the launch-bound step in a CUDA graph and replay it",
            "static_x, static_y = x.clone(), y.clone()           # fixed shapes and addresses\n"
            "opt = torch.optim.AdamW(model.parameters(), capturable=True)\n"
            "s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())\n"
            "with torch.cuda.stream(s):                           # warm up on a side stream\n"
            "    for _ in range(3):\n"
            "        opt.zero_grad(set_to_none=True)\n"
            "        loss_fn(model(static_x), static_y).backward(); opt.step()\n"
            "torch.cuda.current_stream().wait_stream(s)\n"
            "g = torch.cuda.CUDAGraph()\n"
            "opt.zero_grad(set_to_none=True)\n"
            "with torch.cuda.graph(g):\n"
            "    static_loss = loss_fn(model(static_x), static_y)\n"
            "    static_loss.backward(); opt.step()\n"
            "for x, y in loader:\n"
            "    static_x.copy_(x, non_blocking=True); static_y.copy_(y, non_blocking=True)\n"
            "    g.replay()\n"
            "# or: model = torch.compile(model, mode=\"reduce-overhead\"); or make_graphed_callables"),
        FixVariant(
            "launch-bound",
            "Compile with CUDA graphs: TrainingArguments(torch_compile=True, "
            "torch_compile_mode=\"reduce-overhead\")",
            _HF_GRAPHS,
            framework="hf-trainer", kind="config"),
        FixVariant(
            "launch-bound",
            "Compile the LightningModule with mode=\"reduce-overhead\" (CUDA graphs) before fit",
            _LIGHTNING_GRAPHS,
            framework="lightning"),
        FixVariant(
            "launch-bound",
            "Compile with CUDA graphs through accelerate's dynamo plugin (mode=\"reduce-overhead\")",
            _ACCELERATE_GRAPHS,
            framework="accelerate"),
        FixVariant(
            "launch-bound-compiled",
            "Replay the compiled graphs as CUDA graphs: torch.compile(model, mode=\"reduce-overhead\")",
            "model = torch.compile(model, mode=\"reduce-overhead\")  # CUDA graph trees\n"
            "# keep the compiled step static: no .item()/print of tensors inside it, fixed shapes",
        ),
        FixVariant(
            "launch-bound-compiled",
            "Replay the compiled graphs as CUDA graphs: TrainingArguments(torch_compile_mode="
            "\"reduce-overhead\")",
            _HF_GRAPHS,
            framework="hf-trainer", kind="config"),
        FixVariant(
            "launch-bound-compiled",
            "Replay the compiled graphs as CUDA graphs: compile with mode=\"reduce-overhead\"",
            _LIGHTNING_GRAPHS,
            framework="lightning"),
        FixVariant(
            "launch-bound-compiled",
            "Replay the compiled graphs as CUDA graphs: accelerate's dynamo plugin with "
            "mode=\"reduce-overhead\"",
            _ACCELERATE_GRAPHS,
            framework="accelerate"),
    )
    explained_by: ClassVar[Mapping[str, str]] = {
        "loader-jitter": "the GPU idles while the step waits for its input",
        "cpu-bound-loss": "the loss's host work and syncs leave the GPU idle",
        "host-sync": "the host waits in syncs inside the step",
    }
    model = "replay with each step after its data phase as one CUDA graph launch"
    assumptions = ("the step can be made static (shapes, addresses, no host syncs)",
                   "kernel durations are unchanged by capture")
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        if len(steps) < MIN_STEADY_STEPS or not graphs_available(graph) \
                or uses_cuda_graphs(graph, steps):
            return
        ops = [o for o in steps_ops(graph, steps) if o.pid == steps[0].pid]
        kernels = [o for o in ops if o.kind is GpuOpKind.KERNEL]
        if not kernels:
            return
        median_kernel = statistics.median(o.duration_ns for o in kernels)
        short = sum(1 for o in kernels if o.duration_ns < SHORT_KERNEL_NS)
        if short < 0.5 * len(kernels):
            return  # long kernels hide their launches: not launch-bound
        launches = process_calls(graph, steps, lambda c: api_names.is_launch(c.name))
        busy = sum(o.duration_ns for o in kernels)
        step_total = sum(s.time_ns for s in steps)
        idle_share = max(0.0, 1 - busy / step_total) if step_total else 0.0
        gap_idle = launch_gap_idle(graph, ops)
        gap_share = gap_idle / step_total if step_total else 0.0
        if gap_share < MIN_LAUNCH_IDLE_SHARE:
            return  # the GPU's idle time is not waiting for launches
        # A compiled step: reduce-overhead graphs what Inductor generated, nothing around it.
        compiled, hooked = compiled_capture(graph, steps)
        regions = compiled or graphable_regions(steps)
        # Inductor's kernels without torch.compile's ranges (an nsys export): which host spans
        # its graphs cover is unknown, so the whole step stands in, and the finding says so.
        unmarked = not compiled and any(TRITON_KERNEL.match(o.name) for o in kernels)
        waits = host_waits(graph, process_calls(graph, steps, lambda c: api_names.may_block(c.name)))
        unwait = [RemoveWaits(tuple(w.call.id for w in waits))] if waits else []
        effects = [*unwait, CaptureGraph(tuple(regions))]
        yield ctx.finding(
            type(self),
            message=(f"launch-bound: {len(kernels) / len(steps):.0f} kernels per step, median "
                     f"{median_kernel / 1e3:.1f} µs; the GPU idles {gap_share:.0%} of the step in "
                     f"launch gaps ({idle_share:.0%} idle in all), no CUDA graph"),
            evidence=Evidence(
                steps=tuple(s.index for s in steps),
                api_calls=tuple(sorted({c.name for c in launches})),
                quantities={
                    "kernels_per_step": len(kernels) / len(steps),
                    "launches_per_step": len(launches) / len(steps),
                    "median_kernel_ns": float(median_kernel),
                    "gpu_busy_ns_per_step": per_step(busy, steps),
                    "gpu_idle_share": idle_share,
                    "launch_gap_idle_ns_per_step": per_step(gap_idle, steps),
                    "launch_gap_idle_share": gap_share,
                    **({"eager_collectives_per_step": per_step(len(hooked), steps)} if hooked else {}),
                },
            ),
            mechanism="launch-bound-compiled" if compiled or unmarked else "launch-bound",
            extra_assumptions=((
                "the step runs Inductor's (Triton) kernels but the trace has no torch.compile "
                "ranges, so the whole step is taken as captured; reduce-overhead records only "
                "the compiled graphs (on HF run_clm.py a whole-step capture said 2.46x where "
                "1.05x was measured): an upper bound",) if unmarked else ()),
            confidence=Confidence.HEURISTIC if unmarked else None,
            model=(f"replay with each torch.compile graph call ({len(compiled)} in "
                   f"{len(steps)} steps) as one CUDA graph launch; the eager code around them "
                   "as it is" + (f", and so are the {per_step(len(hooked), steps):.0f} collectives "
                                 "per step that hooks fire inside the compiled ranges (DDP's "
                                 "reducer, gradient hooks), with the host work between them"
                                 if hooked else "") if compiled else None),
            requires=("host-sync",) if waits else (),
            effects=effects,
            low_effects=[*unwait, CaptureGraph(tuple(regions), 2 * GRAPH_LAUNCH_NS, 2 * GRAPH_NODE_GAP_NS)],
            high_effects=[*unwait,
                          CaptureGraph(tuple(regions), GRAPH_LAUNCH_NS // 2, GRAPH_NODE_GAP_NS // 2)],
        )
