"""loader-jitter: the input pipeline makes some steps much slower than the rest."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import ClassVar

from advisor.engine.context import RuleContext
from advisor.engine.effects import BatchSupply, ScaleHostWork, SetCallDurations
from advisor.engine.loader_model import LoaderRun, propose
from advisor.engine.loader_starts import restart_steps
from advisor.engine.rule import (
    MIN_SPREAD_STEPS,
    Category,
    Confidence,
    Evidence,
    Finding,
    FixVariant,
    Option,
    Requirement,
    Rule,
    Status,
    Validation,
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
hand-over of a ready batch: a few percent of the loading time it replaces (the pessimistic
bound of the hand-over)."""
HANDOVER_NS = 250_000
"""The training thread's time to take one ready batch from DataLoader workers (queue get,
tensors rebuilt from shared memory): 0.16-0.25 ms per batch measured in the Lightning ImageNet
example with 12 workers on the H100 host (fixtures/public/lightning-vit-b, its data ranges)."""
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


MIN_STEADY_STEPS = 3
"""Steps outside the loader's starts and refills needed to judge the rest: fewer leave no
median to compare a step with (the window is all epoch boundary; RUN001 reports it)."""


def _prefetch_depth(ctx: RuleContext) -> int | None:
    """The prefetch queue's depth (workers x prefetch_factor) where the session recorded the
    loader; None: read it from the trace (`advisor.engine.loader_starts.restart_steps`)."""
    cfg = ctx.facts.loader
    if cfg is None or not cfg.num_workers:
        return None
    return cfg.num_workers * (cfg.prefetch_factor or 2)


def _data_host_ns(step: Step) -> int:
    return sum(b - a for a, b in step.phases.get("data", []))


PREFETCH_THREAD = (
    "import queue, threading\n"
    "batches = queue.Queue(maxsize=4)\n"
    "def fill():\n"
    "    while True:\n"
    "        x, y = get_batch('train')   # one fancy-index gather, not a Python loop of slices\n"
    "        batches.put((x.pin_memory().to(device, non_blocking=True),\n"
    "                     y.pin_memory().to(device, non_blocking=True)))\n"
    "threading.Thread(target=fill, daemon=True).start()\n"
    "X, Y = batches.get()                # in the loop, instead of get_batch('train')")
"""A script's own batch function run ahead of the step on a thread: part of both loading fixes."""


class LoaderJitter(Rule):
    """The input pipeline holds the step back: loading in the step, saturated workers, reallocations.

    What it detects
    ---------------
    Steps that wait for their input: the GPU idles while the training thread loads the next
    batch, itself (``num_workers=0``) or from DataLoader workers that cannot keep up. Also
    steady-state steps far slower than the median (robust outliers) that coincide with
    allocation calls (``cudaMalloc``/``cudaFree``/``cudaHostAlloc``/``cudaFreeHost``: buffers
    grown for a larger sample, a caching allocator being emptied) or with a data phase much
    longer than usual, and allocation calls in the step in general.

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

    Speedup model
    -------------
    The fix depends on the mechanism the evidence shows, and so does the model:

    - input produced on the training thread (``num_workers=0``, or a hand-written batch
      fetch such as nanoGPT's ``get_batch`` between forward and backward, which
      `advisor.graph.phase_content` names the data phase): with N worker processes each
      batch is loaded in parallel with the step, so the training thread waits only for what
      N workers cannot supply during the rest of the step, ``max(5% handover, D/N - C)`` per
      step (D the data phase, C the rest of the step). N is bounded by the host: the cores this
      process may use (recorded by `advisor profile`; for a bare trace an assumed 8, stated in
      the estimate's assumptions) less one for the training thread. Low bound: N/2 effective
      workers (logical CPUs may be hyperthread siblings); high bound: the loading hidden
      entirely (a worker may load a batch faster than the training thread did).
    - workers saturated (``num_workers>0`` and the step still waits). Under `advisor
      profile` the run's own clock measures the pool (`advisor.engine.loader_model`): N
      workers supply a batch every S (the steady steps' mean), so one worker takes
      ``W = N * S``; the step itself needs C (the step less its wait); each epoch's restart
      costs the forks (growing with N) and the fresh workers' first batch. With N' workers
      on F free cores (the host's less the training thread and the pin-memory thread) the
      step is ``max(C, W / min(N', F))`` plus the restarts at N'. The proposal is the fewest
      workers within 1% of the best such step, so more workers are not proposed where their
      forks at every epoch start cost more than their supply gains; non-persistent workers
      whose restarts cost 2% of the step get ``persistent_workers=True`` first. Low bound:
      half the free cores (hyperthread siblings); high: the loading hidden entirely (DALI,
      cached samples). Without the run's clock (a bare trace) the N'/N model of the
      training-thread case is used.
    - allocation churn: allocation calls cost nothing (a preallocated pool) and each outlier
      step's data phase takes the median data-phase time. Named only with allocation calls
      in the steps: slow steps that wait for their batch without them are the worker pool's
      bursts (N workers finish together, then the queue runs dry), a supply deficit.

    Estimated on the mean step, since jitter is invisible to the median.

    Known false positives
    ---------------------
    Periodic work that belongs to the job (checkpointing, evaluation every N steps) also makes
    outliers; it is reported only when allocation calls or a long data phase coincide with it.
    A DataLoader iterator's start (an epoch, an evaluation pass) is not: the step that starts
    it (its forks, the new iterator's ``cudaHostAlloc``, the evaluation inside it) and the
    steps that refill its prefetch queue are left out of the evidence
    (`advisor.engine.loader_starts`: the session's timed ``__iter__`` or the trace's Python
    ranges), since ``loader-restarts`` (RUN001) estimates them against the whole run; with
    too few steps left the rule says nothing (pytorch/examples' ImageNet, 4 workers, a window
    across an epoch boundary: the settled step was 143 ms at 4, 8 and 15 workers).

    References
    ----------
    NVIDIA MLPerf Training RetinaNet (DALI decoder preallocation hints: +10%); NVIDIA DALI docs,
    ``preallocate_width_hint``/``preallocate_height_hint``; PyTorch ``torch.cuda.memory`` notes
    on ``empty_cache``.
    """

    code = "INPT001"
    name = "loader-jitter"
    validation = Validation(  # fixtures/scenarios-check
        {"seq": 8192, "fin": 128, "d": 1024, "heads": 16, "ff": 1024, "layers": 3},
        measured=1.55, runs=3)
    category = Category.INPUT
    status = Status.STABLE  # validated on its H100 scenario: docs/validation.md
    requires = (Requirement.STEPS, Requirement.SPREAD)
    options: ClassVar[Mapping[str, Option]] = {
        "outlier-mads": Option(
            OUTLIER_MADS,
            "a step is an outlier above the median plus this many median absolute deviations: "
            "raise it for a job whose steps legitimately vary (variable sequence lengths), "
            "lower it to catch milder jitter",
            minimum=0.0, maximum=1000.0),
    }
    mechanisms: ClassVar[Mapping[str, str]] = {
        "main-thread-loading": "the training thread loads each batch itself (num_workers=0) "
                               "while the GPU waits",
        "script-loading": "the training thread prepares each batch in the script's own code "
                          "(no DataLoader) while the GPU waits",
        "saturated-workers": "DataLoader workers run, but cannot produce batches as fast as the "
                             "GPU consumes them",
        "allocation-churn": "buffers are allocated and freed in the step (variable sample sizes, "
                            "empty_cache), making random steps slow",
    }
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "main-thread-loading": ("loader:num_workers=$workers:pin_memory=true:"
                                "persistent_workers=true:prefetch_factor=4",),
    }
    fixes: ClassVar[tuple[FixVariant, ...]] = (
        FixVariant(
            "script-loading",
            "Prepare batches off the training thread: build batch N+1 in a prefetch thread "
            "while step N runs, pinned, copied non_blocking, indexing vectorised (or a "
            "DataLoader with $workers worker processes)",
            "# the script's own batch function, e.g. get_batch(): run it ahead of the step\n"
            + PREFETCH_THREAD + "\n"
            "# or wrap the dataset in a DataLoader(dataset, num_workers=$workers, pin_memory=True,\n"
            "#                                     persistent_workers=True, prefetch_factor=4)"),
        FixVariant(
            "main-thread-loading",
            "Prepare batches off the training thread: $workers DataLoader worker processes "
            "(now num_workers=0) or a prefetch thread, pinned, copied non_blocking, indexing "
            "vectorised",
            "loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,\n"
            "                    num_workers=$workers,        # was 0: loading ran on the training thread\n"
            "                    pin_memory=True, persistent_workers=True, prefetch_factor=4)\n"
            "# then copy with x.cuda(non_blocking=True)\n"
            "# a hand-written get_batch(): build batch N+1 while step N runs\n"
            + PREFETCH_THREAD),
        FixVariant(
            "main-thread-loading",
            "Set TrainingArguments(dataloader_num_workers=$workers) so batches load in worker "
            "processes",
            "args = TrainingArguments(..., dataloader_num_workers=$workers,\n"
            "                         dataloader_pin_memory=True,\n"
            "                         dataloader_persistent_workers=True,\n"
            "                         dataloader_prefetch_factor=4)",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "main-thread-loading",
            "Return a DataLoader with num_workers=$workers from train_dataloader() so batches "
            "load in worker processes",
            "def train_dataloader(self):   # LightningModule / LightningDataModule\n"
            "    return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True,\n"
            "                      num_workers=$workers, pin_memory=True,\n"
            "                      persistent_workers=True, prefetch_factor=4)",
            framework="lightning"),
        FixVariant(
            "main-thread-loading",
            "Load batches in $workers DataLoader worker processes before accelerator.prepare",
            "loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,\n"
            "                    num_workers=$workers, pin_memory=True,\n"
            "                    persistent_workers=True, prefetch_factor=4)\n"
            "model, opt, loader = accelerator.prepare(model, opt, loader)",
            framework="accelerate"),
        FixVariant(
            "saturated-workers",
            "Make loading cheaper than the step: $more_workers decode on the GPU (DALI) or cache "
            "decoded samples",
            "# $workers_note\n"
            "# decode on the GPU with DALI:\n"
            "from nvidia.dali import pipeline_def, fn\n"
            "@pipeline_def(batch_size=batch_size, num_threads=$workers, device_id=0)\n"
            "def pipe():\n"
            "    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True)\n"
            "    images = fn.decoders.image(jpegs, device='mixed')   # nvJPEG on the GPU\n"
            "    images = fn.random_resized_crop(images, size=224)\n"
            "    return fn.crop_mirror_normalize(images, dtype=types.FLOAT), labels\n"
            "# or: decode once and cache (uint8 tensors / WebDataset shards), augment on the GPU"),
        FixVariant(
            "saturated-workers",
            "Make loading cheaper than the step: $more_workers cache or pre-tokenize/decode the "
            "dataset",
            "# $workers_note\n"
            "args = TrainingArguments(..., dataloader_num_workers=$workers,\n"
            "                         dataloader_persistent_workers=True)\n"
            "dataset = dataset.map(preprocess, batched=True, num_proc=$workers)  # once, cached",
            framework="hf-trainer", kind="config"),
        FixVariant(
            "allocation-churn",
            "Preallocate input buffers at the largest sample size and reuse them",
            "buf = torch.empty(max_bytes, dtype=torch.uint8, pin_memory=True)  # once\n"
            "batch = buf[:n].view(shape)            # per step, no new allocation\n"
            "# never call torch.cuda.empty_cache() in the loop\n"
            "# DALI: fn.decoders.image(..., preallocate_width_hint=W, preallocate_height_hint=H),\n"
            "#       bytes_per_sample_hint=..."),
    )
    model: ClassVar[Mapping[str, str]] = {
        "main-thread-loading": "replay with the data phase loaded by $parallel parallel worker "
                               "processes (bounded by the host's cores) behind the rest of the step",
        "script-loading": "replay with the data phase prepared by $parallel parallel workers "
                          "(bounded by the host's cores) behind the rest of the step",
        "saturated-workers": "replay with the data phase loaded by $parallel times the workers' "
                             "throughput behind the rest of the step (high: GPU decode)",
        "allocation-churn": "replay with allocations served from a pool and outlier data phases "
                            "at the median",
    }
    confidence = Confidence.MODELED

    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        if len(ctx.steps) < MIN_SPREAD_STEPS:  # the runner skips the rule, saying why
            return
        # A DataLoader iterator's start (an epoch, an evaluation pass) and the refill after it
        # are the run's structure, which the whole-run accounting owns (RUN001): its forks,
        # the new iterator's pinned buffers (cudaHostAlloc) and the fresh workers' first
        # batches are not jitter, and no step-level fix removes them (issue 33).
        explained = restart_steps(graph, ctx.steps, ctx.facts.loader_start_steps,
                                  _prefetch_depth(ctx))
        steps = [s for s in ctx.steps if s.index not in explained]
        if len(steps) < MIN_STEADY_STEPS:
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
        kinds = Counter(c.name for c in allocs)
        med = statistics.median(s.time_ns for s in steps)
        worst = max(steps, key=lambda s: s.time_ns)
        quantities = {
            "outlier_steps": len(coinciding),
            # As traced (profiler on): the report's baseline step leaves that out.
            "traced_median_step_ns": float(med),
            "traced_worst_step_ns": float(worst.time_ns),
            "alloc_calls_per_step": len(allocs) / len(steps),
            "alloc_host_ns_per_step": per_step(sum(c.duration_ns for c in allocs), steps),
            "input_wait_share": input_wait,
            "step_time_cv": statistics.pstdev(s.time_ns for s in steps) / statistics.fmean(
                s.time_ns for s in steps),
        }
        evidence_steps = tuple(s.index for s in coinciding) or tuple(sorted(alloc_steps))
        if waits_for_input:
            # The mechanism follows the evidence (issue 33). Steps that wait for their batch
            # are a supply deficit (the training thread loads, or the workers cannot keep up),
            # and slow data phases among them are that deficit's bursts (N workers finish
            # together, then the queue runs dry), not reallocations. Allocation churn needs
            # allocation calls; where both are seen, the fix named is the one whose mechanism
            # explains more of the step, and the message names the other.
            found = list(self._input_bound(graph, ctx, steps, input_wait, data_gpu, quantities,
                                           evidence_steps, kinds, len(slow_data)))
            churn = [fix_allocs, *scale_data]
            if not allocs or found[0].estimate.speedup >= ctx.speedup(churn, "mean"):
                yield from found
                return
        yield ctx.finding(
            type(self),
            message=(f"{len(coinciding)} of {len(steps)} steps are outliers (worst "
                     f"{worst.time_ns / 1e6:.2f} ms vs median {med / 1e6:.2f} ms) with "
                     + (", ".join(f"{k} x{v}" for k, v in kinds.most_common(3))
                        or "a slow data phase") + " in the step"
                     + (f"; also, the GPU waits for input {input_wait:.0%} of the step"
                        if waits_for_input else "")),
            evidence=Evidence(
                steps=evidence_steps,
                api_calls=tuple(kinds),
                ranges=("data",) if slow_data else (),
                node_ids=tuple(f"api:{c.id}" for c in allocs[:50]),
                quantities=quantities,
            ),
            mechanism="allocation-churn",
            effects=[fix_allocs, *scale_data],
            low_effects=[fix_allocs],
            basis="mean",
            assumptions=("the largest sample fits a buffer allocated once",
                         "outlier data phases become median ones once buffers are reused"),
        )

    def _input_bound(self, graph: OpGraph, ctx: RuleContext, steps: list[Step], input_wait: float,
                     data_gpu: float, quantities: dict, evidence_steps: tuple[int, ...],
                     kinds: Counter, bursts: int = 0) -> Iterable[Finding]:
        """The step waits for its input: which mechanism, and what the host can supply
        (``steps``: those outside the loader's starts and refills)."""
        workers, how = loader_workers(graph, ctx)
        run = ctx.facts.loader_run
        if workers and run is not None and run.workers == workers and run.steady_steps:
            yield self._worker_pool(ctx, steps, run, input_wait, data_gpu, quantities,
                                    evidence_steps, kinds, bursts, how)
            return
        cores, assumed = ctx.facts.cores_or_assumed()
        # one core stays with the training thread (it launches the GPU work)
        target = max(1, min(cores - 1, MAX_WORKERS))
        on_thread = workers == 0
        current = max(1, workers or 0)
        # `advisor profile` saw no DataLoader: the script's own code builds the batches, so no
        # DataLoader setting reaches them (no knob: `--try` reports the fix as a code change)
        in_script = on_thread and ctx.facts.no_dataloader
        if on_thread:
            mechanism = "script-loading" if in_script else "main-thread-loading"
            gain, gain_low = target, target / 2
        elif workers is None:  # workers run, how many is unknown: assume room to double
            mechanism, gain, gain_low = "saturated-workers", 2.0, 1.0
        else:
            mechanism = "saturated-workers"
            gain = max(1.0, target / current)
            gain_low = max(1.0, gain / 2)
        spans = [(s, a, b) for s in steps for a, b in s.phases.get("data", [])]
        supply = batch_cost(ctx, workers)

        def effects(parallel: float) -> list:
            out: list = [BatchSupply(supply[0], parallel, supply[1])] if parallel < float("inf") else []
            for s, a, b in spans:
                d = max(1, _data_host_ns(s))
                rest = max(0, s.time_ns - d)
                # D/N must hide behind the rest of the step; what does not is still waited for
                wait = max(min(HANDOVER_NS, PREFETCH_HOST_SHARE * d), d / parallel - rest)
                out.append(ScaleHostWork(((a, b),), min(1.0, wait / d)))
            return out

        # High bound: the loading hidden entirely (the training thread only takes ready
        # batches), as with GPU decode, or as when a worker loads a batch faster than the
        # training thread did (workers run one intra-op thread each; measured 1.7x cheaper per
        # batch in the imagenet example, docs/validation.md).
        high = effects(float("inf"))
        more = (f"raise num_workers from {workers} to {target}, "
                if mechanism == "saturated-workers" and target > current else "")
        note = (f"the host has {cores} cores: num_workers={target} leaves one to the training "
                "thread" if not assumed else f"assumed {cores} cores: set num_workers to the "
                "cores you have, less one")
        data_ms = data_gpu / len(steps) / 1e6
        message = (f"the GPU waits for input {input_wait:.0%} of the step ({data_ms:.2f} ms per "
                   "step in the data phase): "
                   + ("the training thread prepares each batch in the script's own code (no "
                      "DataLoader)" if in_script
                      else "the training thread loads each batch itself (num_workers=0)" if on_thread
                      else f"{workers} DataLoader workers cannot keep up" if workers
                      else "DataLoader workers cannot keep up"))
        if kinds:
            message += "; also " + ", ".join(f"{k} x{v}" for k, v in kinds.most_common(3))
        quantities = {**quantities, "loader_workers": float(-1 if workers is None else workers),
                      "host_cores": float(cores), "suggested_workers": float(target)}
        if ctx.facts.loader_cpu_ns_per_batch is not None:
            quantities["loader_cpu_ns_per_batch"] = ctx.facts.loader_cpu_ns_per_batch
        assumptions = [f"DataLoader workers: {how}",
                       f"{gain:g} batches load in parallel (low: {gain_low:g}, e.g. hyperthread "
                       "siblings), each as costly as on the training thread",
                       "the training thread keeps one core"]
        if assumed:
            assumptions.insert(0, assumed)
        yield ctx.finding(
            type(self),
            message=message,
            evidence=Evidence(steps=evidence_steps or tuple(s.index for s in steps),
                              api_calls=tuple(kinds), ranges=("data",), quantities=quantities),
            mechanism=mechanism,
            params={"workers": target, "more_workers": more, "workers_note": note,
                    "parallel": f"{gain:g}"},
            effects=effects(gain),
            low_effects=effects(gain_low),
            high_effects=high,
            basis="mean",
            assumptions=tuple(assumptions),
        )


    def _worker_pool(self, ctx: RuleContext, steps: list[Step], run: LoaderRun,
                     input_wait: float, data_gpu: float, quantities: dict,
                     evidence_steps: tuple[int, ...], kinds: Counter,
                     bursts: int, how: str) -> Finding:
        """Workers run and the step still waits: the pool's measured rate, start-up cost and
        the host's cores say how many workers the step wants, and whether more make it slower
        (`advisor.engine.loader_model`)."""
        prop = propose(run)
        best, now = prop.best, run.step_ns
        raise_to = best.workers > run.workers and best.step_ns < now / (1 + MIN_GAIN)
        # loading hidden (GPU decode, cached samples): the step is the training thread's own
        hidden = now / (run.consume_ns + (best.restart_ns if raise_to else run.restart_ns))
        if raise_to:
            speedup, low, high = best.speedup_over(run), prop.low.speedup_over(run), hidden
        else:  # more workers do not help here: the fix is cheaper loading
            speedup, low, high = hidden, 1.0, hidden
        restarts = (not run.persistent and prop.restarts_share >= MIN_RESTART_SHARE)
        epoch = f"every {run.epoch_steps:g} steps" if run.epoch_steps else "each epoch"
        first = (f"set persistent_workers=True first (the workers restart {epoch}, "
                 f"{prop.restarts_share:.0%} of the step), " if restarts else "")
        more = (f"raise num_workers from {run.workers} to {best.workers}, or" if raise_to
                else "or" if first else "")
        ms = lambda ns: f"{ns / 1e6:.1f} ms"  # noqa: E731
        message = (f"the GPU waits for input {input_wait:.0%} of the step "
                   f"({data_gpu / len(steps) / 1e6:.2f} ms per step in the data phase): "
                   f"{run.workers} DataLoader workers supply a batch every {ms(run.supply_ns)} "
                   f"(each takes {ms(run.worker_batch_ns)}), the step itself needs "
                   f"{ms(run.consume_ns)}")
        if bursts:
            message += f"; {bursts} steps wait for a burst (the workers finish together)"
        if restarts:
            message += (f"; the workers are not persistent and restart {epoch} "
                        f"({ms(run.restart_ns)} per step): set persistent_workers=True first")
        if prop.more_is_slower(run):
            message += (f"; {prop.most.workers} workers would make the step slower "
                        f"({ms(prop.most.step_ns)} against {ms(now)} now: "
                        + ("each epoch start forks every worker again" if run.restart_ns
                           else "they share the host's cores") + ")")
        if not raise_to:
            message += ("; more workers would not make the step faster "
                        f"({best.workers} predicted at {ms(best.step_ns)}, now {ms(now)})")
        if kinds:
            message += "; also " + ", ".join(f"{k} x{v}" for k, v in kinds.most_common(3))
        target = ctx.step_ns / speedup
        # the loader's floor: a batch per W / P, and the restarts' share of every step, which
        # no step fix shortens
        parallel = best.parallel if raise_to else float(min(run.workers, run.free_cores))
        restart = best.restart_ns if raise_to else run.restart_ns
        effects: list = [BatchSupply(run.worker_batch_ns + parallel * restart, parallel,
                                     "the workers' measured rate, with their restarts' share "
                                     "per step")]
        for s in steps:
            d = max(1, _data_host_ns(s))
            wait = max(min(HANDOVER_NS, PREFETCH_HOST_SHARE * d), target - (s.time_ns - d))
            effects += [ScaleHostWork(((a, b),), min(1.0, wait / d)) for a, b in s.phases.get("data", [])]
        quantities = {**quantities, "loader_workers": float(run.workers),
                      "host_cores": float(run.cores), "suggested_workers": float(best.workers),
                      "worker_batch_ns": run.worker_batch_ns, "supply_ns": run.supply_ns,
                      "consume_ns": run.consume_ns, "restart_ns_per_step": run.restart_ns,
                      "predicted_step_ns": best.step_ns, "run_step_ns": now}
        if run.epoch_steps:
            quantities["epoch_steps"] = run.epoch_steps
        model = (f"pool of {run.workers} workers measured in the run: one batch every "
                 f"{ms(run.supply_ns)}, the step's own {ms(run.consume_ns)}, restarts "
                 f"{ms(run.restart_ns)} per step; with N workers on {run.free_cores} free cores "
                 "the step is max(own, N-worker supply) plus the restarts at N "
                 f"(N={best.workers}: {ms(best.step_ns)} against {ms(now)})")
        assumptions = (f"DataLoader workers: {how}",
                       f"the main process keeps {run.cores - run.free_cores} of the "
                       f"{run.cores} cores (training thread"
                       + (", pin-memory thread)" if run.pin_memory else ")"),
                       f"low: half the free cores ({run.free_cores / 2:g}) make batches "
                       "(hyperthread siblings)",
                       "high: loading hidden entirely (GPU decode or cached samples)",
                       "a worker's batch costs the same at any worker count the host has "
                       "cores for")
        found = ctx.finding(
            type(self), message=message,
            evidence=Evidence(steps=evidence_steps or tuple(s.index for s in steps),
                              api_calls=tuple(kinds), ranges=("data",), quantities=quantities),
            mechanism="saturated-workers",
            params={"workers": best.workers if raise_to else run.workers,
                    "more_workers": first + more,
                    "workers_note": (f"{run.workers} workers on {run.cores} cores: "
                                     + (f"num_workers={best.workers} keeps up with the step"
                                        if raise_to else "more workers would not help")),
                    "parallel": f"{best.parallel:g}"},
            effects=effects, basis="mean", model=model, assumptions=assumptions)
        e = found.estimate
        if raise_to:  # `advisor profile --try` can time the worker count the model proposes
            found = replace(found, fix=replace(found.fix, knobs=(
                f"loader:num_workers={best.workers}",)))
        return replace(found, estimate=ctx.estimate(
            speedup, min(low, speedup), max(high, speedup), e.model, e.assumptions, e.basis,
            e.floor, e.floor_binds))


MIN_GAIN = 0.02
"""More workers are proposed only where the model expects them to save 2% of the step (the bar
of every finding)."""
MIN_RESTART_SHARE = 0.02
"""Restarts of non-persistent workers that cost 2% of the step are named, with
``persistent_workers`` as the first fix."""

WORKER_BATCH_COST = 0.6
"""A DataLoader worker produces a batch in this share of the time the training thread took
(451 ms against 757 ms per batch in the imagenet example at ``-j 7``, 16 CPUs, H100 host,
docs/validation.md "loader-imagenet": a worker runs one intra-op thread and no GPU work). The
loader floor uses the cheaper worker so that it stays a floor."""


def batch_cost(ctx: RuleContext, workers: int | None) -> tuple[float, str]:
    """What one batch costs the loader to produce, and where that was read: the floor of every
    step once the input pipeline is the bottleneck (`BatchSupply`).

    With loading on the training thread (``num_workers=0``), a worker's share
    (`WORKER_BATCH_COST`) of the host time the thread spent in ``DataLoader.__next__`` per
    batch (recorded by `advisor profile` outside the recorded window), else of the data
    phase's mean host time per step. With N saturated workers, they
    supply one batch per step: each takes N steps (the unprofiled replayed mean step) per
    batch; an unknown N is taken as the one the rule assumes (room to double: 1)."""
    steps = ctx.steps
    if workers == 0:
        measured = ctx.facts.loader_cpu_ns_per_batch
        if measured:
            return (measured * WORKER_BATCH_COST, "a worker's share of the training thread's "
                    "time per batch, recorded by advisor profile")
        return (statistics.fmean(_data_host_ns(s) for s in steps) * WORKER_BATCH_COST,
                "a worker's share of the training thread's data phase per step")
    n = workers if workers else 1
    return (n * ctx.baseline.mean_ns,
            f"{n} saturated worker{'s' if n > 1 else ''} supplying one batch per step")


MAX_WORKERS = 32
"""More DataLoader workers than this rarely help one GPU (each holds a dataset copy and
prefetched batches; start-up grows with them)."""
SINGLE_ITER = "_SingleProcessDataLoaderIter"
MULTI_ITER = "_MultiProcessingDataLoaderIter"


def loader_workers(graph: OpGraph, ctx: RuleContext) -> tuple[int | None, str]:
    """The DataLoader's worker count and where it was read: recorded by `advisor profile`, or
    told by torch.profiler's ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``
    range (the class names the loader type); None when nothing says."""
    if ctx.facts.loader is not None:
        return ctx.facts.loader.num_workers, (f"num_workers={ctx.facts.loader.num_workers}, "
                                              "recorded by advisor profile")
    if ctx.facts.no_dataloader:
        return 0, ("no DataLoader: advisor profile saw the script build none, so its own code "
                   "prepares the batches on the training thread")
    pid = ctx.steps[0].pid
    for r in graph.ranges:
        if r.pid != pid or "DataLoader" not in r.name:
            continue
        if SINGLE_ITER in r.name:
            return 0, f"num_workers=0 (the trace's {SINGLE_ITER} ranges)"
        if MULTI_ITER in r.name:
            return None, f"num_workers>0 (the trace's {MULTI_ITER} ranges)"
    return 0, ("not in the trace; the training thread's data phase is taken as loading on "
               "the training thread (num_workers=0)")
