"""loader-jitter: the input pipeline makes some steps much slower than the rest."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import ScaleHostWork, SetCallDurations
from advisor.engine.rule import (
    Category,
    Confidence,
    Evidence,
    Finding,
    Fix,
    Option,
    Requirement,
    Rule,
    Status,
)
from advisor.graph import api_names
from advisor.graph.model import OpGraph, Step
from advisor.graph.queries import per_step, process_calls, step_of

OUTLIER_MADS = 4.0
"""A step is an outlier when it exceeds the median by this many median absolute deviations
(and by `OUTLIER_MIN_SHARE` of the median): robust to the outliers themselves."""
OUTLIER_MIN_SHARE = 0.10
PREFETCH_HOST_SHARE = 0.05
"""With loading in DataLoader workers and prefetching, the main thread's data phase is the
hand-over of a ready batch: a few percent of the loading time it replaces."""
ALLOC_MIN_NS = 50_000
"""Allocation calls shorter than this are the caching allocator's fast path, not a reallocation."""


def _outliers(steps: list[Step], mads: float = OUTLIER_MADS) -> list[Step]:
    times = [s.time_ns for s in steps]
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times) or 1.0
    limit = med + max(mads * mad, OUTLIER_MIN_SHARE * med)
    return [s for s in steps if s.time_ns > limit]


INPUT_WAIT_MIN_SHARE = 0.05
"""The GPU must idle in the data phase for at least this share of the step before the step
counts as waiting for its input (the rest is under run-to-run noise)."""


def _data_host_ns(step: Step) -> int:
    return sum(b - a for a, b in step.phases.get("data", []))


class LoaderJitter(Rule):
    """The input pipeline makes random steps slow: reallocations and decoding in the step.

    What it detects
    ---------------
    Steady-state steps far slower than the median (robust outliers) that coincide with
    allocation calls (``cudaMalloc``/``cudaFree``/``cudaHostAlloc``/``cudaFreeHost``: buffers
    grown for a larger sample, a caching allocator being emptied) or with a data phase much
    longer than usual; allocation calls in the step in general; and steps whose GPU idles
    while the host loads the next batch (the step waits for its input).

    Why it is slow
    --------------
    A new pinned buffer costs milliseconds of page locking, ``cudaFree`` synchronizes the whole
    device, and a decoder that reallocates for a larger image stalls the step that meets it.
    Data-parallel jobs run at the pace of the slowest rank, so rare slow steps cost every GPU.

    Evidence
    --------
    The outlier steps with their time against the median, the allocation calls inside them and
    their host time, the data phase's time in outliers against the median step.

    Example
    -------
    ```python
    def next_batch():
        n = random.choice(sizes)                      # variable sample size
        buf = torch.empty(n, pin_memory=True)         # new pinned buffer: cudaHostAlloc
        ...
        if step % 7 == 0: torch.cuda.empty_cache()    # device memory returned, reallocated
    ```

    Use instead
    -----------
    ```python
    buf = torch.empty(max_size, pin_memory=True)      # once, at the largest sample size
    def next_batch():
        n = random.choice(sizes)
        view = buf[:n]                                # reuse
    # DALI: fn.decoders.image(..., preallocate_width_hint=W, preallocate_height_hint=H),
    #       bytes_per_sample_hint=...; DataLoader: pin_memory=True, num_workers>0, prefetch_factor
    ```

    Speedup model
    -------------
    Replay of the analysed steps with allocation calls costing nothing (served from a
    preallocated pool) and each outlier step's data phase taking the median data-phase time;
    when the step waits for its input, the main thread's data phase shrinks to 5% (loading in
    workers, prefetched). Estimated on the mean step, since jitter is invisible to the median.
    Low bound: only the allocation calls fixed and half the data phase kept.

    Known false positives
    ---------------------
    Periodic work that belongs to the job (checkpointing, evaluation every N steps) also makes
    outliers; it is reported only when allocation calls or a long data phase coincide with it.

    References
    ----------
    NVIDIA MLPerf Training RetinaNet (DALI decoder preallocation hints: +10%); NVIDIA DALI docs,
    ``preallocate_width_hint``/``preallocate_height_hint``; PyTorch ``torch.cuda.memory`` notes
    on ``empty_cache``.
    """

    code = "INPT001"
    name = "loader-jitter"
    category = Category.INPUT
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    requires = (Requirement.STEPS,)
    options: ClassVar[Mapping[str, Option]] = {
        "outlier-mads": Option(
            OUTLIER_MADS,
            "a step is an outlier above the median plus this many median absolute deviations: "
            "raise it for a job whose steps legitimately vary (variable sequence lengths), "
            "lower it to catch milder jitter"),
    }

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        steps = ctx.steps
        if len(steps) < 5:
            return
        allocs = process_calls(graph, steps, lambda c: api_names.is_alloc(c.name)
                               and c.duration_ns >= ALLOC_MIN_NS)
        outliers = _outliers(steps, float(self.option(ctx, "outlier-mads")))
        data_median = statistics.median(_data_host_ns(s) for s in steps)
        slow_data = [s for s in outliers if _data_host_ns(s) > 2 * data_median + 100_000]
        alloc_steps = {step_of(steps, c.start_ns).index for c in allocs if step_of(steps, c.start_ns)}
        coinciding = [s for s in outliers if s.index in alloc_steps or s in slow_data]
        projector = graph.projector
        data_gpu = sum(projector.gpu_time(s.pid, b) - projector.gpu_time(s.pid, a)
                       for s in steps for a, b in s.phases.get("data", []))
        step_total = sum(s.time_ns for s in steps)
        input_wait = data_gpu / step_total if step_total else 0.0
        waits_for_input = input_wait >= INPUT_WAIT_MIN_SHARE
        if not coinciding and not allocs and not waits_for_input:
            return
        fix_allocs = SetCallDurations(tuple((c.id, 0) for c in allocs))
        scale_data = []
        for s in slow_data:
            for a, b in s.phases.get("data", []):
                factor = data_median / max(1, _data_host_ns(s))
                scale_data.append(ScaleHostWork(((a, b),), factor))
        # A step that waits for its input: loading moves to worker processes and is prefetched,
        # so the main thread's data phase shrinks to handing over a ready batch.
        data_spans = tuple(span for s in steps for span in s.phases.get("data", []))
        prefetch = [ScaleHostWork(data_spans, PREFETCH_HOST_SHARE)] if waits_for_input else []
        prefetch_low = [ScaleHostWork(data_spans, 0.5)] if waits_for_input else []
        kinds = Counter(c.name for c in allocs)
        med = statistics.median(s.time_ns for s in steps)
        worst = max(steps, key=lambda s: s.time_ns)
        if coinciding or allocs:
            message = (f"{len(coinciding)} of {len(steps)} steps are outliers (worst "
                       f"{worst.time_ns / 1e6:.2f} ms vs median {med / 1e6:.2f} ms) with "
                       + (", ".join(f"{k} x{v}" for k, v in kinds.most_common(3)) or "a slow data phase")
                       + " in the step")
        else:
            message = ""
        if waits_for_input:
            message += ("; " if message else "") + (
                f"the GPU waits for input {input_wait:.0%} of the step "
                f"({data_gpu / len(steps) / 1e6:.2f} ms per step in the data phase)")
        yield ctx.finding(
            type(self),
            message=message,
            evidence=Evidence(
                steps=tuple(s.index for s in coinciding) or tuple(sorted(alloc_steps)),
                api_calls=tuple(kinds),
                ranges=("data",) if slow_data else (),
                node_ids=tuple(f"api:{c.id}" for c in allocs[:50]),
                quantities={
                    "outlier_steps": len(coinciding),
                    # As traced (profiler on): the report's baseline step leaves that out.
                    "traced_median_step_ns": float(med),
                    "traced_worst_step_ns": float(worst.time_ns),
                    "alloc_calls_per_step": len(allocs) / len(steps),
                    "alloc_host_ns_per_step": per_step(sum(c.duration_ns for c in allocs), steps),
                    "input_wait_share": input_wait,
                    "step_time_cv": statistics.pstdev(s.time_ns for s in steps) / statistics.fmean(
                        s.time_ns for s in steps),
                },
            ),
            fix=Fix(
                title="Preallocate input buffers at the largest sample size and reuse them",
                snippet=("buf = torch.empty(max_bytes, dtype=torch.uint8, pin_memory=True)  # once\n"
                         "batch = buf[:n].view(shape)            # per step, no new allocation\n"
                         "# never call torch.cuda.empty_cache() in the loop\n"
                         "loader = DataLoader(ds, num_workers=8, pin_memory=True, prefetch_factor=4,\n"
                         "                    persistent_workers=True)   # load ahead, off the main thread\n"
                         "# DALI: preallocate_width_hint / preallocate_height_hint / bytes_per_sample_hint"),
            ),
            effects=[fix_allocs, *scale_data, *prefetch],
            low_effects=[fix_allocs, *prefetch_low],
            basis="mean",
            model="replay with allocations served from a pool and outlier data phases at the median",
            assumptions=("the largest sample fits a buffer allocated once",
                         "outlier data phases become median ones once buffers are reused"),
            confidence=Confidence.MODELED,
        )
