"""Communication the GPU waits for instead of overlapping it with compute."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, ClassVar

from advisor.engine.job_model import Job
from advisor.engine.job_whatif import JobContext, JobEffect
from advisor.engine.rule import Finding, FixVariant, JobRequirement
from advisor.job.rule import JobRule

if TYPE_CHECKING:  # annotations only: the rule loads in every `advisor analyze` (start-up)
    from advisor.engine.rank_summary import Collective, StepSummary

_SHARDED = ("AllGather", "ReduceScatter")
_BUCKETS = ("DDP(model, bucket_cap_mb=100, gradient_as_bucket_view=True, static_graph=True)\n"
            "# and no host sync inside backward; the first bucket should be ready early")

NCCL_LATENCY_NS = 25_000
"""NCCL's fixed cost per collective within a node, order of magnitude: nccl-tests' all-reduce of
a few bytes takes 10-25 µs over NVLink (more across nodes). Not fitted to any trace of ours."""
LATENCY_SHARE = 0.25
"""All-reduces are latency-bound when that fixed cost is at least this share of their own time
(their mean under 4 x 25 µs): fewer, larger ones win back a good part of it."""


def job_share(job: Job) -> float:
    """Communication's share of the GPUs' kernel time (HTA's "communication %" of kernel time)."""
    comm = comp = 0
    for r in job.rank_ids:
        for st in job.steps:
            s = job.rank_steps[r][st.index]
            comm += s.category_ns.get("communication", 0)
            comp += sum(s.category_ns.values())  # HTA counts copies and memsets as kernels too
    return comm / comp if comp else 0.0


def _transfer(c: Collective) -> int:
    """The exposed part of a collective that is its own transfer, not waiting for a late rank."""
    return max(0, c.exposed_ns - c.waiting_ns)


def accumulation_bursts(step: StepSummary) -> list[list[Collective]]:
    """All-reduces of a step split into the micro-batches that issued them.

    Under gradient accumulation without ``no_sync()``, DDP all-reduces every micro-batch's
    gradients: the step's all-reduces come in k equal bursts, and between two bursts runs the
    next micro-batch's whole forward pass, a longer gap than any between buckets of one backward.
    Returns one burst when the step does not look like that.
    """
    ar = [c for c in step.collectives if c.kind == "AllReduce"]
    n = len(ar)
    gaps = [b.start_ns - a.end_ns for a, b in itertools.pairwise(ar)]
    marked = step.phase_count.get("forward", 0)
    if marked:  # phase marks say how many micro-batches ran: only that split is a candidate
        candidates = [marked] if marked >= 2 else []
        min_size = 1
    else:  # unmarked: a burst of one all-reduce has no inner gaps to compare with
        candidates = list(range(min(n // 2, 16), 1, -1))
        min_size = 2
    for k in candidates:
        if n % k or n // k < min_size:
            continue
        size = n // k
        cuts = {size * j - 1 for j in range(1, k)}
        inner = [g for i, g in enumerate(gaps) if i not in cuts]
        outer = [gaps[i] for i in cuts]
        if outer and min(outer) > 2 * max(inner, default=0) and min(outer) > 0:
            return [ar[j * size:(j + 1) * size] for j in range(k)]
    return [ar] if ar else []


class ExposedCommunication(JobRule):
    """Collectives the GPU waits for instead of overlapping them with compute.

    What it detects
    ---------------
    Communication kernels (NCCL, old ``ncclKernel_*`` and new ``ncclDevKernel_*`` names) during
    which no compute kernel runs on the same GPU, minus the part spent waiting for a late rank
    (that is the straggler's cost, see `straggler-rank`). The fix is picked from the evidence:
    all-reduces in k bursts per step (gradient accumulation without ``no_sync()``), exposed
    all-gathers/reduce-scatters (FSDP without prefetch), host calls held until a collective ends
    (a collective that blocks the host), else DDP's bucketing.

    Why it is slow
    --------------
    While a collective runs alone, the SMs idle; DDP and FSDP are built to overlap gradient
    communication with the backward pass and parameter gathers with the previous layer's compute.

    Evidence
    --------
    Per rank and step: exposed communication, its collectives, the waiting part.

    Example
    -------
    ```python
    for i, batch in enumerate(loader):
        loss = model(batch).mean() / accum
        loss.backward()            # all-reduces on every micro-batch
        if (i + 1) % accum == 0:
            opt.step(); opt.zero_grad()
    ```

    Use instead
    -----------
    ```python
    ctx = model.no_sync() if (i + 1) % accum else contextlib.nullcontext()
    with ctx:
        loss.backward()            # all-reduce only on the last micro-batch
    ```

    Speedup model
    -------------
    Each rank's own work per step loses the fix's share of its exposed transfer; the job's step is
    the slowest rank's. ``no_sync``: the first k-1 bursts go (low: their exposed part, high: their
    whole time). Overlap fixes: the exposed transfer except the step's last collective, which has
    no compute left to hide behind, and at most the step's compute not already hiding some
    (low: half of it).

    Known false positives
    ---------------------
    Pipeline-parallel send/recv between stages is exposed by design in the bubble.

    References
    ----------
    PyTorch DDP notes (bucket_cap_mb, gradient_as_bucket_view, no_sync); FSDP
    ``forward_prefetch``/``backward_prefetch``; NCCL kernel naming.
    """

    code = "DIST001"
    name = "exposed-communication"
    requires = (JobRequirement.STEPS, JobRequirement.COLLECTIVES)
    mechanisms: ClassVar[Mapping[str, str]] = {
        "accumulation-without-no-sync": "gradient accumulation all-reduces every micro-batch's "
                                        "gradients (no no_sync())",
        "blocking-collective": "the host waits for a collective to finish (wait(), .item() or a "
                               "synchronize right after it) and the GPU idles meanwhile",
        "fsdp-without-prefetch": "FSDP gathers parameters only when the layer needs them",
        "exposed-all-to-all": "all-to-all or send/recv runs with no compute beside it",
        "latency-bound-all-reduce": "many small all-reduces, each paying NCCL's fixed latency",
        "unoverlapped-all-reduce": "gradient all-reduces run after the backward, not beside it",
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant("accumulation-without-no-sync",
                   "Skip DDP's all-reduce on all but the last micro-batch with model.no_sync()",
                   "ctx = model.no_sync() if (i + 1) % accum_steps else contextlib.nullcontext()\n"
                   "with ctx:\n    loss.backward()"),
        FixVariant("accumulation-without-no-sync",
                   "Let accelerate skip the all-reduce on all but the last micro-batch",
                   "with accelerator.accumulate(model):\n    accelerator.backward(loss)",
                   framework="accelerate"),
        FixVariant("accumulation-without-no-sync",
                   "Let Lightning accumulate: it skips the all-reduce on all but the last "
                   "micro-batch",
                   "Trainer(accumulate_grad_batches=$micro_batches)", framework="lightning",
                   kind="config"),
        FixVariant("blocking-collective",
                   "Let collectives run asynchronously: async_op=True and wait() only where the "
                   "result is used; keep reduced metrics on the GPU",
                   "work = dist.all_reduce(t, async_op=True)\n# ... queue more work ...\n"
                   "work.wait()  # no .item()/synchronize right after"),
        FixVariant("fsdp-without-prefetch", "Prefetch FSDP's all-gathers",
                   "FSDP(model, forward_prefetch=True, "
                   "backward_prefetch=BackwardPrefetch.BACKWARD_PRE)\n"
                   "# FSDP2: layer.set_modules_to_forward_prefetch([next_layer]); "
                   "layer.set_modules_to_backward_prefetch([prev_layer])", kind="config"),
        FixVariant("exposed-all-to-all",
                   "Overlap the all-to-all with compute: pipeline the next batch's exchange behind "
                   "this batch's dense compute, or split it into chunks interleaved with compute",
                   "# TorchRec: TrainPipelineSparseDist(model, optimizer, device)\n"
                   "# MoE: overlap dispatch/combine all-to-all with expert compute (chunked)"),
        FixVariant("latency-bound-all-reduce",
                   "Fewer, larger DDP buckets: many small all-reduces each pay NCCL's fixed latency",
                   _BUCKETS, kind="config"),
        FixVariant("unoverlapped-all-reduce", "Overlap gradient all-reduces with the backward pass",
                   _BUCKETS, kind="config"),
    )
    _HIDDEN = ("job replay: exposed collective transfer hidden behind compute, except the step's "
               "last collective")
    model: ClassVar[Mapping[str, str]] = {
        "accumulation-without-no-sync": "job replay: the first k-1 all-reduce bursts per step "
                                        "removed, with their host work (collective calls, DDP's "
                                        "reducer)",
        "blocking-collective": "job replay: the GPU idle time while the host waited on a "
                               "collective removed",
        "fsdp-without-prefetch": "job replay: exposed all-gather/reduce-scatter transfer hidden "
                                 "behind the neighbouring layer's compute, except the step's last "
                                 "collective",
        "exposed-all-to-all": _HIDDEN,
        "latency-bound-all-reduce": _HIDDEN,
        "unoverlapped-all-reduce": _HIDDEN,
    }

    def check(self, job: Job, ctx: JobContext) -> Iterable[Finding]:
        steps = [s.index for s in job.steps]
        per = job.rank_steps
        ranks = job.rank_ids

        bursts = {(r, i): accumulation_bursts(per[r][i]) for r in ranks for i in steps}
        k = statistics.median(len(b) for b in bursts.values())
        if k >= 2:
            def removed(r, st, whole=False):
                b = bursts[(r, st.index)]
                cs = [c for burst in b[:-1] for c in burst]
                return sum(c.duration_ns - c.waiting_ns if whole else _transfer(c) for c in cs)

            def host_removed(r, st):
                # the host's share of the removed bursts: their collectives and DDP's reducer work
                return per[r][st.index].host_comm_ns * (k - 1) / k

            yield ctx.finding(
                type(self), f"all-reduce runs on every one of {int(k)} micro-batches per step: "
                f"gradient accumulation without no_sync()", ctx.evidence({"micro_batches": k}),
                effects=(JobEffect(removed, host_removed),),
                high_effects=(JobEffect(lambda r, st: removed(r, st, True), host_removed),),
                mechanism="accumulation-without-no-sync", params={"micro_batches": int(k)},
                extra_assumptions=(f"{int(k)} micro-batches per step, each all-reducing its "
                                   "gradients", "the last micro-batch's all-reduce stays as it is"),
                ranks=job.rank_ids)
            return

        def hideable(r, st, kinds=None):
            colls = [c for c in per[r][st.index].collectives if kinds is None or c.kind in kinds]
            if not colls:
                return 0.0
            s = per[r][st.index]
            tail = max(s.collectives, key=lambda c: c.end_ns)
            # overlap hides communication only behind compute not already hiding some
            free_compute = max(0, s.compute_ns - (s.comm_ns - s.exposed_comm_ns))
            return float(min(sum(_transfer(c) for c in colls if c is not tail), free_compute))

        exposed = statistics.median(
            sum(_transfer(c) for c in per[r][i].collectives) for r in ranks for i in steps)
        sharded = statistics.median(
            sum(_transfer(c) for c in per[r][i].collectives if c.kind in _SHARDED)
            for r in ranks for i in steps)
        host_wait = statistics.median(per[r][i].host_wait_on_comm_ns for r in ranks for i in steps)

        if host_wait > 0:
            def unblocked(r, st):
                s = per[r][st.index]
                return float(min(s.host_wait_on_comm_ns, s.idle_ns))
            yield ctx.finding(
                type(self), "the host waits for collectives to finish (a blocking wait(), .item() "
                "or a synchronize after an all-reduce), so the GPU idles until the host launches "
                "again", ctx.evidence({"host_wait_on_comm_ns": host_wait}),
                effects=(JobEffect(unblocked),),
                low_effects=(JobEffect(lambda r, st: unblocked(r, st) / 2),),
                mechanism="blocking-collective",
                extra_assumptions=("the host has other work to queue while the collective runs",),
                ranks=job.rank_ids)

        if sharded > exposed / 2 and sharded > 0:
            yield ctx.finding(
                type(self), "FSDP's all-gathers/reduce-scatters run exposed: parameters are "
                "gathered only when the layer needs them",
                ctx.evidence({"exposed_sharded_ns": sharded}),
                effects=(JobEffect(lambda r, st: hideable(r, st, _SHARDED)),),
                low_effects=(JobEffect(lambda r, st: hideable(r, st, _SHARDED) / 2),),
                mechanism="fsdp-without-prefetch",
                extra_assumptions=("enough compute per layer to cover its gather",),
                ranks=job.rank_ids)
            return
        if exposed <= 0:
            return
        reduce = statistics.median(
            sum(_transfer(c) for c in per[r][i].collectives if c.kind == "AllReduce")
            for r in ranks for i in steps)
        assumed = ("the step has compute left to overlap each collective with",)
        half = (JobEffect(lambda r, st: hideable(r, st) / 2),)
        if reduce <= exposed / 2:  # all-to-all / send-recv: embeddings, MoE, pipeline stages
            yield ctx.finding(
                type(self), f"{exposed / 1e6:.2f} ms of all-to-all/send-recv per step runs with no "
                f"compute beside it ({job_share(job):.0%} of the GPU's kernel time is "
                "communication)", ctx.evidence({"exposed_comm_ns": exposed}),
                effects=(JobEffect(hideable),), low_effects=half, mechanism="exposed-all-to-all",
                extra_assumptions=assumed, ranks=job.rank_ids)
            return
        ar = [c for r in ranks for i in steps for c in per[r][i].collectives if c.kind == "AllReduce"]
        per_step = len(ar) / max(1, len(ranks) * len(steps))
        own = statistics.mean(c.duration_ns - c.waiting_ns for c in ar) if ar else 0
        # many all-reduces, each short enough that NCCL's fixed cost is a good part of it. Equal
        # durations alone do not say so: DDP makes its buckets equal, 25 MB each by default, and
        # those are bandwidth-bound (0.14 ms each, median, on the H200 2-GPU run at batch 16).
        latency_bound = bool(ar) and per_step >= 8 and LATENCY_SHARE * own <= NCCL_LATENCY_NS
        mech = "latency-bound-all-reduce" if latency_bound else "unoverlapped-all-reduce"
        many = (f" ({per_step:.0f} all-reduces per step of {own / 1e3:.0f} µs on average, a quarter "
                f"or more of it NCCL's fixed cost)" if latency_bound else "")
        yield ctx.finding(
            type(self),
            f"{exposed / 1e6:.2f} ms of communication per step runs with no compute beside it{many}",
            ctx.evidence({"exposed_comm_ns": exposed, "allreduce_per_step": per_step}),
            effects=(JobEffect(hideable),), low_effects=half, mechanism=mech,
            extra_assumptions=assumed, ranks=job.rank_ids)
