"""Find the training steps in a trace, mark warm-up, attach phases and GPU-side times.

Steps come, in order of preference, from ranges named like a step (``ProfilerStep#12``,
``step 12``, ``train_step``, ``iteration 3``), and otherwise from the repeating structure of the
kernel launch sequence. Warm-up steps (compilation, autotuning, allocator growth) are excluded
from every statistic.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from advisor.graph.model import PHASES, CpuRange, Step
from advisor.graph.projection import Projector

if TYPE_CHECKING:
    from advisor.graph.model import OpGraph

STEP_NAME = re.compile(
    r"^\s*(?:profilerstep|train(?:ing)?[ _]?step|train[ _]?iter(?:ation)?|step|iteration|iter)"
    r"(?:[\s_#:=-]*(\d+))?\s*$",
    re.IGNORECASE,
)

_PHASE_ALIASES: dict[str, tuple[str, ...]] = {
    "data": ("data", "dataloader", "data_loading", "data loading", "load_batch", "next_batch",
             "get_batch", "input", "inputs", "h2d"),
    "forward": ("forward", "fwd", "model_forward", "forward_pass", "forward pass"),
    "loss": ("loss", "compute_loss", "criterion", "loss_fn"),
    "backward": ("backward", "bwd", "backward_pass", "backward pass"),
    "optimizer": ("optimizer", "optimizer_step", "optimizer.step", "opt_step", "optim",
                  "optimizer step", "zero_grad"),
}
_PHASE_BY_ALIAS = {alias: phase for phase, names in _PHASE_ALIASES.items() for alias in names}
_PHASE_PREFIXES = (
    ("enumerate(dataloader)", "data"),  # torch.profiler's DataLoader __next__ annotation
    ("optimizer.step#", "optimizer"),  # torch.profiler's Optimizer.step#AdamW.step
    ("optimizer.zero_grad#", "optimizer"),
)

WARMUP_SLOW_FACTOR = 2.0
"""A leading step this many times slower than the median of the rest is still warming up."""


def step_number(name: str) -> int | bool | None:
    """The number in a step-like name, None when step-like without one, False otherwise."""
    m = STEP_NAME.match(name)
    if not m:
        return False
    return int(m.group(1)) if m.group(1) is not None else None


def is_step_name(name: str) -> bool:
    return step_number(name) is not False


def phase_of(name: str) -> str | None:
    """Map a range name to one of `PHASES`, or None."""
    key = name.strip().strip("#").strip().lower()  # "## forward ##" annotations
    if key in _PHASE_BY_ALIAS:
        return _PHASE_BY_ALIAS[key]
    for prefix, phase in _PHASE_PREFIXES:
        if key.startswith(prefix):
            return phase
    return None


def steps_from_ranges(ranges: Iterable[CpuRange]) -> list[Step]:
    """Steps from step-named ranges: the outermost ones on the thread that has the most."""
    candidates = [r for r in ranges if is_step_name(r.name)]
    if not candidates:
        return []
    per_thread: dict[tuple[int, int], list[CpuRange]] = defaultdict(list)
    for r in candidates:
        per_thread[(r.pid, r.tid)].append(r)
    steps: list[Step] = []
    # One step-carrying thread per process: a multi-process job has one per rank.
    best_by_pid: dict[int, tuple[int, int]] = {}
    for key, rs in per_thread.items():
        if key[0] not in best_by_pid or len(rs) > len(per_thread[best_by_pid[key[0]]]):
            best_by_pid[key[0]] = key
    for key in best_by_pid.values():
        rs = sorted(per_thread[key], key=lambda r: (r.start_ns, -r.end_ns))
        outer: list[CpuRange] = []
        for r in rs:
            if outer and r.start_ns < outer[-1].end_ns:
                continue  # nested inside the previous step range
            outer.append(r)
        for pos, r in enumerate(outer):
            number = step_number(r.name)
            steps.append(
                Step(
                    index=number if isinstance(number, int) and number is not True else pos,
                    name=r.name,
                    pid=r.pid,
                    tid=r.tid,
                    cpu_start_ns=r.start_ns,
                    cpu_end_ns=r.end_ns,
                )
            )
    return steps


def steps_from_launch_pattern(graph: OpGraph, min_steps: int = 3) -> list[Step]:
    """Steps from the repeating kernel sequence when the trace names no steps.

    The anchor is the rarest kernel name (seen at least ``min_steps`` times) whose occurrences
    cut the launch sequence into equal-length pieces: a name launched once per iteration.
    Names that repeat per layer cut finer pieces and lose to it.
    """
    by_thread: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
    for op in graph.kernels():
        call = graph.launcher(op)
        if call is not None:
            by_thread[(call.pid, call.tid)].append((call.start_ns, op.name))
    if not by_thread:
        return []
    key, seq = max(by_thread.items(), key=lambda kv: len(kv[1]))
    seq.sort()
    names = [n for _, n in seq]
    counts = Counter(names)
    for name, count in sorted(counts.items(), key=lambda kv: (kv[1], kv[0])):
        if count < min_steps:
            continue
        positions = [i for i, n in enumerate(names) if n == name]
        gaps = [b - a for a, b in itertools.pairwise(positions)]
        if len(gaps) < min_steps - 1 or min(gaps) < 4:
            continue
        mean = statistics.fmean(gaps)
        if statistics.pstdev(gaps) > 0.02 * mean:
            continue
        if len(gaps) * mean < 0.5 * len(names):
            continue
        steps = []
        for i, (a, b) in enumerate(itertools.pairwise(positions)):
            steps.append(Step(index=i, name=f"step {i} (launch pattern)", pid=key[0], tid=key[1],
                              cpu_start_ns=seq[a][0], cpu_end_ns=seq[b][0]))
        return steps
    return []


def attach_phases(graph: OpGraph, steps: Sequence[Step]) -> None:
    """Fill each step's phases from phase-named ranges inside it on its thread."""
    for step in steps:
        step.phases = {}
        covered_until = -1
        for r in graph.ranges_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns):
            phase = phase_of(r.name)
            if phase is None or r.start_ns < covered_until:
                continue  # not a phase, or nested inside a phase range already taken
            step.phases.setdefault(phase, []).append((r.start_ns, min(r.end_ns, step.cpu_end_ns)))
            covered_until = r.end_ns


def attach_gpu_times(graph: OpGraph, steps: Sequence[Step], projector: Projector | None = None) -> None:
    projector = projector or graph.projector
    for step in steps:
        if not projector.has_gpu_work(step.pid):
            continue
        step.gpu_start_ns = projector.gpu_time(step.pid, step.cpu_start_ns)
        step.gpu_end_ns = projector.gpu_time(step.pid, step.cpu_end_ns)


def mark_warmup(steps: Sequence[Step]) -> None:
    """The first step of each thread, and leading steps far slower than the rest, are warm-up."""
    per_thread: dict[tuple[int, int], list[Step]] = defaultdict(list)
    for s in steps:
        per_thread[(s.pid, s.tid)].append(s)
    for thread_steps in per_thread.values():
        thread_steps.sort(key=lambda s: s.cpu_start_ns)
        if len(thread_steps) < 3:
            continue
        thread_steps[0].warmup = True
        rest = [s.time_ns for s in thread_steps[1:]]
        median = statistics.median(rest)
        for s in thread_steps[1:-2]:
            if s.time_ns > WARMUP_SLOW_FACTOR * median:
                s.warmup = True
            else:
                break


def phase_order(names: Iterable[str]) -> list[str]:
    """Phase names in execution order, known phases first."""
    names = set(names)
    return [p for p in PHASES if p in names] + sorted(names - set(PHASES))
