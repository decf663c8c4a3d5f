"""May these two runs be compared at all? If not, the gate fails closed (exit 2).

A gate verdict on two different programs, two GPU models or two profilers would be a number
without meaning, and a pass would let anything through. The checks:

* both runs have steady-state steps;
* both were captured the same way: an nsys capture and a torch.profiler capture time the same
  step differently (profiler overhead, what counts as the step);
* the same GPU model, where both traces name one;
* the same workload, judged on every kind of evidence both runs carry, each of which must agree:

  - the kernel mix: the Jaccard similarity of the kernels per step, the larger of the weighted
    one (counts) and the plain one (which kernels at all; a loop turned into one vectorised call
    changes counts thirtyfold, not the set). Changing a GEMM's precision or fusing attention
    changes kernel names without changing the workload, so GEMM, convolution and attention
    kernels count by category, not name;
  - the kernels' shapes: the kernels both runs launch, launched with the same grid and block
    (the size of the tensors they run on). Another model in the same harness runs the same
    elementwise and normalisation kernels on other sizes; a fix elsewhere leaves them alone;
  - the work per step: the kernels both runs launch, launched as many times per step. A fix
    changes some kernels' counts (a loop vectorised, a kernel fused away) and leaves the rest
    of the step alone; step ranges cut into pieces divide every kernel's count per step by the
    number of pieces, so a "step" of half the work was judged 38% faster although every kernel
    ran 30% slower;
  - when there is no kernel evidence (runs without GPU work, or results that lack the kernel
    list), the host operators with their input shapes (torch.profiler's aten ops): the model's
    identity on the host. Not otherwise: a fix legitimately rewrites the host side (a loss loop
    vectorised, a step captured in a CUDA graph replays with no operators at all), measured
    1-5% alike on those scenario pairs while their kernels' shapes agree 92-99%.

  When neither run carries any of these (no kernels and no operators), the gate cannot tell
  and fails closed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from advisor.errors import AnalysisError
from advisor.gate.inputs import GateInput, KernelRow

MIN_SIMILARITY = 0.3
"""Below this kernel-mix similarity the runs are different workloads. Measured: each H100 rule
scenario's fixed and bad variants 0.35 (a per-sample loss loop against its vectorised, graphed
form) to 1.0, most above 0.6; different models 0.01-0.22 (nsys-ai, HTA, Kineto samples and our
scenarios against each other)."""

MIN_SHAPE_AGREEMENT = 0.5
"""Of the launches of kernels both runs run (weighted by the smaller count), the share launched
with the same geometry must be at least this: most of the unchanged code runs on the same sizes.
A majority rule, not a fitted value; measured values are in docs/gate.md."""

COUNT_TOLERANCE = 0.1
"""A kernel runs "as many times per step" in both runs when its larger count per step is at most
this much above the smaller. Measured: in all 11 repeat captures of one code (tests/gate/data/
repeats, the scenarios' ``*_repeat`` captures) every shared kernel's count per step is the same
to the last digit; 10% leaves room for one launch more or less in a window of ten steps."""

MIN_COUNT_AGREEMENT = 0.5
"""Of the launches of kernels both runs run (weighted by the smaller count per step), the share
whose count per step agrees (`COUNT_TOLERANCE`) must be at least this: most of the unchanged code
runs as often per step. A majority rule, like `MIN_SHAPE_AGREEMENT`. Measured: repeat captures
100%; the scenarios' fixed and bad variants 84-100% (unfused-attention's softmax path the
lowest); the per-step share of a run whose step ranges are each cut in two is 0-3%."""

MIN_OP_SIMILARITY = 0.3
"""Host operators with their input shapes, `similarity` as for kernels, and the same floor."""

_BY_CATEGORY = frozenset({"gemm", "convolution", "attention"})
GRAPH_CATEGORY = "cuda-graph"


def identity_mix(kernels: Iterable[KernelRow]) -> Counter[str]:
    """Kernel counts per step keyed by what identifies the workload (see the module doc)."""
    mix: Counter[str] = Counter()
    for k in kernels:
        if k.category == GRAPH_CATEGORY:
            continue
        key = k.category if k.category in _BY_CATEGORY else k.name
        mix[key] += k.count_per_step
    return mix


def name_mix(kernels: Iterable[KernelRow]) -> Counter[str]:
    """Kernel counts per step by full name, graph replays included: "the very same GPU work"."""
    mix: Counter[str] = Counter()
    for k in kernels:
        mix[k.name] += k.count_per_step
    return mix


def weighted_jaccard(a: Counter[str], b: Counter[str]) -> float:
    keys = set(a) | set(b)
    top = sum(min(a[k], b[k]) for k in keys)
    bottom = sum(max(a[k], b[k]) for k in keys)
    return top / bottom if bottom else 1.0


def set_jaccard(a: Counter[str], b: Counter[str]) -> float:
    keys = set(a) | set(b)
    return len(set(a) & set(b)) / len(keys) if keys else 1.0


def similarity(a: Counter[str], b: Counter[str]) -> float:
    """The lenient reading: the runs are alike if either their counts or their sets are."""
    return max(weighted_jaccard(a, b), set_jaccard(a, b))


def containment(part: Counter[str], whole: Counter[str]) -> float:
    """How much of ``part`` is also in ``whole`` (1.0: all of it), by count or by set."""
    total = sum(part.values())
    by_count = sum(min(part[k], whole[k]) for k in part) / total if total else 1.0
    by_set = len(set(part) & set(whole)) / len(part) if part else 1.0
    return max(by_count, by_set)


def hides_kernels(x: GateInput) -> bool:
    """CUDA graph replays traced as single rows: the kernels inside them are not listed."""
    return any(k.category == GRAPH_CATEGORY for k in x.kernels)


HIDDEN = "replays CUDA graphs traced as single rows: its kernels are hidden"


def kernel_similarity(base: GateInput, cand: GateInput) -> tuple[float | None, str]:
    """The similarity of the two kernel mixes, and how it was measured (None: not measurable;
    the reason starts with a run's name and `HIDDEN` when a graph replay hides its kernels)."""
    if not (base.kernels_complete and cand.kernels_complete):
        return None, "an input lacks the full kernel list (kernels.all): workload check skipped"
    a, b = identity_mix(base.kernels), identity_mix(cand.kernels)
    graphs = [x for x in (base, cand) if hides_kernels(x)]
    empty = [x for x, mix in ((base, a), (cand, b)) if x in graphs and not mix]
    if empty:
        # Replays traced as one row and nothing outside them: the run's kernel mix is unknown,
        # and an empty mix matches anything (two unrelated graphed steps were 100% "alike").
        return None, f"{empty[0].name} {HIDDEN}"
    if len(graphs) == 1:
        # Only the kernels outside the graph can be matched, against the eager run's.
        part, whole = (a, b) if graphs[0] is base else (b, a)
        return containment(part, whole), "kernels outside CUDA graph replays"
    return similarity(a, b), "kernel mix"


def shape_agreement(base: GateInput, cand: GateInput) -> float | None:
    """Of the kernels both runs launch, the share of launches with the same grid and block
    (per kernel: the overlap of its two geometry distributions; weighted by the smaller launch
    count). None when no shared kernel has recorded geometry. GEMM/attention/convolution
    kernels are left out: a fix that changes their precision or tiling changes their grid."""
    a = {k.name: k for k in base.kernels if k.shapes and k.category not in _BY_CATEGORY}
    b = {k.name: k for k in cand.kernels if k.shapes and k.category not in _BY_CATEGORY}
    num = den = 0.0
    for name in a.keys() & b.keys():
        sa, sb = a[name].shapes, b[name].shapes
        ta, tb = sum(sa.values()), sum(sb.values())
        if not ta or not tb:
            continue
        overlap = sum(min(sa[g] / ta, sb.get(g, 0.0) / tb) for g in sa)
        weight = min(ta, tb)
        num += weight * overlap
        den += weight
    return num / den if den else None


def count_agreement(base: GateInput, cand: GateInput) -> float | None:
    """Of the kernels both runs launch, the share of launches (weighted by the smaller count
    per step) whose count per step agrees within `COUNT_TOLERANCE`. None when no kernel is
    launched by both."""
    a = {k.name: k.count_per_step for k in base.kernels if k.count_per_step > 0}
    b = {k.name: k.count_per_step for k in cand.kernels if k.count_per_step > 0}
    num = den = 0.0
    for name in a.keys() & b.keys():
        low, high = sorted((a[name], b[name]))
        den += low
        if high <= low * (1 + COUNT_TOLERANCE):
            num += low
    return num / den if den else None


COUNTS = "launches per step of the kernels both run"
"""How `count_agreement` is named in the verdict's notes and refusals."""


def _evidence(base: GateInput, cand: GateInput
              ) -> tuple[list[tuple[str, float, float]], list[str], str | None]:
    """(what, similarity, floor) for each kind of evidence both runs carry; notes; and why the
    kernel mix is hidden (None when it is not)."""
    checks: list[tuple[str, float, float]] = []
    notes: list[str] = []
    hidden: str | None = None
    both_kernels = bool(base.kernels) and bool(cand.kernels)
    if base.kernels or cand.kernels:
        similarity, how = kernel_similarity(base, cand)
        if similarity is None and HIDDEN in how:
            hidden = how
        elif similarity is None:
            notes.append(how)
        else:
            checks.append((how, similarity, MIN_SIMILARITY))
    if both_kernels:
        shapes = shape_agreement(base, cand)
        if shapes is not None:
            checks.append(("launch shapes of the kernels both run", shapes, MIN_SHAPE_AGREEMENT))
        counts = count_agreement(base, cand)
        if counts is not None:
            checks.append((COUNTS, counts, MIN_COUNT_AGREEMENT))
    if (not checks or hidden) and base.ops and cand.ops:
        ops = similarity_of_ops(base, cand)
        checks.append(("host operators with their input shapes", ops, MIN_OP_SIMILARITY))
    return checks, notes, hidden


def similarity_of_ops(base: GateInput, cand: GateInput) -> float:
    return similarity(Counter(base.ops), Counter(cand.ops))


def check_comparable(base: GateInput, cand: GateInput) -> list[str]:
    """Raise `AnalysisError` when the runs cannot be compared; else notes on what was checked."""
    for x, role in ((base, "baseline"), (cand, "candidate")):
        if not x.step_times_ms:
            raise AnalysisError(f"{role} {x.path}: no steady-state training steps to compare "
                                "(mark steps with NVTX or record_function ranges, or capture more)")
    if base.trace_format and cand.trace_format and base.trace_format != cand.trace_format:
        raise AnalysisError(
            f"cannot compare captures of different profilers ({base.trace_format} and "
            f"{cand.trace_format}): "
            "profilers time the step differently; capture both runs the same way")
    check_same_process(base, cand)
    check_steps_cover_the_work(base, cand)
    if base.gpus and cand.gpus and set(base.gpus) != set(cand.gpus):
        raise AnalysisError(f"different GPUs: baseline ran on {', '.join(sorted(set(base.gpus)))}, "
                            f"candidate on {', '.join(sorted(set(cand.gpus)))}")
    return check_same_workload(base, cand)


def check_same_process(base: GateInput, cand: GateInput) -> None:
    """Raise `AnalysisError` when the two runs hold different numbers of processes and the
    gate picked each run's process itself (the one with the most steps): a candidate carrying a
    copy of the baseline in a second process with more steps had that copy compared, and its
    own 30% slower steps passed unseen. ``--pid`` names the process instead."""
    if "--pid" in (base.chosen_by, cand.chosen_by) or not (base.processes and cand.processes):
        return
    if base.processes != cand.processes:
        raise AnalysisError(
            f"the runs hold {base.processes} and {cand.processes} processes with steps or GPU "
            f"work, so the process compared (baseline {base.pid}, candidate {cand.pid}, each "
            "the one with the most steps) may not be the training process of both: name it "
            "with --pid, or capture the training process alone; failing closed")


MAX_BETWEEN_SHIFT = 0.05
"""The share of a run's kernels (in its steady window) launched between its steps, not in one,
may differ between the two runs by at most this. Measured: 0% in every one of the 145 fixture
traces the golden tests analyse (scenario captures fixed and bad, nsys and torch.profiler,
repeats, public models, job ranks); step ranges starting 15-25% late, so that each step's
forward falls between steps, 18-22%."""


def between_share(x: GateInput) -> float | None:
    """Of the kernels a run launches in its steady window, the share launched between its steps
    (None when the result predates the count)."""
    between = x.counts.get("kernels_between_steps")
    if between is None:
        return None
    total = between + x.counts.get("kernels", 0.0)
    return between / total if total else 0.0


def check_steps_cover_the_work(base: GateInput, cand: GateInput) -> None:
    """Raise `AnalysisError` when the steps of one run leave out work the other's hold: step
    ranges moved to start late put each step's forward between steps, and a candidate 30%
    slower passed on its shortened steps (forward -100%)."""
    b, c = between_share(base), between_share(cand)
    if b is None or c is None or abs(c - b) <= MAX_BETWEEN_SHIFT:
        return
    raise AnalysisError(
        f"the steps do not cover the same work: {c:.0%} of the candidate's kernels and {b:.0%} "
        "of the baseline's are launched between steps, not in one (step ranges moved or cut "
        "short?); failing closed")


def check_same_workload(base: GateInput, cand: GateInput) -> list[str]:
    """Raise `AnalysisError` unless the evidence both runs carry shows one workload; else notes
    on what was checked. The job gate runs it rank by rank."""
    checks, notes, hidden = _evidence(base, cand)
    for how, value, floor in checks:
        if value < floor:
            hint = (": the steps do not hold the same work (step ranges cut into pieces or "
                    "moved?); the same workload runs its kernels as often per step"
                    if how == COUNTS else "")
            raise AnalysisError(
                f"different workloads: {how}: {value:.0%} alike (at least {floor:.0%} "
                f"expected for two runs of the same training step){hint}")
    if hidden and not any(how.startswith("host operators") for how, _, _ in checks):
        raise AnalysisError(
            f"cannot tell whether these runs are the same workload: {hidden}, and no host "
            "operators with their input shapes show it (capture with torch.profiler, or nsys "
            "with --cuda-graph-trace=node, which lists the graph's kernels); failing closed")
    if hidden:
        notes.append(f"{hidden}: the workload is judged on its host operators")
    if not checks and not notes:
        raise AnalysisError(
            "cannot tell whether these runs are the same workload: neither has GPU kernels or "
            "host operators to compare (capture GPU work, or record operators with "
            "torch.profiler); failing closed")
    if not checks and not (base.kernels_complete and cand.kernels_complete):
        raise AnalysisError(
            "cannot tell whether these runs are the same workload: " + notes[0] + "; re-run "
            "`advisor analyze --json` with this advisor")
    return notes + [f"same workload: {how} {value:.0%} alike" for how, value, _ in checks]
