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
from functools import lru_cache
from typing import TYPE_CHECKING

from advisor.graph.model import PHASES, CpuRange, Step, StepSource
from advisor.graph.phase_content import Renamed, describe, name_by_content
from advisor.graph.projection import Projector
from advisor.graph.step_pattern import StepPattern

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
    return _number(m.group(1)) if m.group(1) is not None else None


_MAX_DIGITS = 18
"""A step number longer than this is no count of steps (``ProfilerStep#`` and 5,000 nines):
it reads as no number, and int() is never asked for more digits than Python converts."""


def _number(digits: str) -> int | None:
    return int(digits) if len(digits) <= _MAX_DIGITS else None


def is_step_name(name: str) -> bool:
    return step_number(name) is not False


@lru_cache(maxsize=65536)  # asked of every range in the steps; a trace repeats its names
def phase_of(name: str) -> str | None:
    """Map a range name to one of `PHASES`, or None."""
    key = name.strip().strip("#").strip().lower()  # "## forward ##" annotations
    if key in _PHASE_BY_ALIAS:
        return _PHASE_BY_ALIAS[key]
    for prefix, phase in _PHASE_PREFIXES:
        if key.startswith(prefix):
            return phase
    return None


_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")


def _index_in_name(name: str) -> int | None:
    number = step_number(name)
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    m = _TRAILING_NUMBER.search(name)
    return _number(m.group(1)) if m else None


def matches_step(name: str, pattern: StepPattern | None) -> bool:
    """A step range: one the user's pattern finds (``re.search``), else one named like a step."""
    return bool(pattern.search(name)) if pattern is not None else is_step_name(name)


def steps_from_ranges(ranges: Iterable[CpuRange], pattern: StepPattern | None = None,
                      pid: int | None = None) -> list[Step]:
    """Steps from step-named ranges: the outermost ones on the thread that has the most.

    ``pattern`` replaces the built-in step names (``--steps``); ``pid`` keeps one process.
    """
    named: dict[str, bool] = {}  # a trace repeats its range names: each is matched once
    candidates = []
    for r in ranges:
        hit = named.get(r.name)
        if hit is None:
            hit = named[r.name] = matches_step(r.name, pattern)
        if hit and (pid is None or r.pid == pid):
            candidates.append(r)
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
        indexes = [_index_in_name(r.name) for r in outer]
        numbered = None not in indexes and len(set(indexes)) == len(indexes)
        for pos, r in enumerate(outer):
            steps.append(
                Step(
                    index=indexes[pos] if numbered else pos,
                    name=r.name,
                    pid=r.pid,
                    tid=r.tid,
                    cpu_start_ns=r.start_ns,
                    cpu_end_ns=r.end_ns,
                )
            )
    return steps


def steps_from_launch_pattern(graph: OpGraph, min_steps: int = 3, pid: int | None = None
                              ) -> list[Step]:
    """Steps from the repeating kernel sequence when the trace names no steps (see
    `find_launch_pattern`)."""
    return find_launch_pattern(graph, min_steps, pid)[0]


def find_launch_pattern(graph: OpGraph, min_steps: int = 3, pid: int | None = None
                        ) -> tuple[list[Step], str]:
    """Steps from the repeating kernel sequence, and a sentence saying how they were cut.

    The anchor is the rarest kernel name (seen at least ``min_steps`` times) whose occurrences
    cut the launch sequence into equal-length pieces: a name launched once per iteration.
    Names that repeat per layer cut finer pieces and lose to it. ``pid`` keeps one process.
    """
    by_thread: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
    for op in graph.kernels():
        call = graph.launcher(op)
        if call is not None and (pid is None or call.pid == pid):
            by_thread[(call.pid, call.tid)].append((call.start_ns, op.name))
    if not by_thread:
        return [], ""
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
        detail = f"repeats of kernel {name[:60]!r} every {round(mean)} launches"
        return steps, detail
    return [], ""


_PROFILER_COUNTER = re.compile(r",?\s*\b(?:seq|op_id)\s*=\s*\d+|#\d+$")


def _host_code_name(name: str) -> str:
    """A range name without the counters profilers add per call (``seq = 46207, op_id = 99``,
    ``ProfilerStep#12``): what stays is the code that ran, the same in every iteration."""
    return _PROFILER_COUNTER.sub("", name).strip()


def host_ranges_repeat(graph: OpGraph, steps: Sequence[Step]) -> tuple[bool | None, str]:
    """Whether each inferred step opens the same host ranges, the test of a real period.

    Every iteration of a training loop runs the same code, so once profiler counters are
    removed the ranges it opens (operators, modules, phases) are the same set each time,
    wherever in the iteration the pieces were cut. Pieces cut per layer open ranges naming a
    different module each (``blocks.3``, ``blocks.4``): they are parts of one iteration, and
    the window is shorter than one training step. None when the steps hold no ranges.
    """
    if len(steps) < 2:
        return None, ""
    sets: list[frozenset[str]] = []
    for step in steps:
        names = frozenset(
            _host_code_name(r.name)
            for r in graph.ranges_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns)
            if r.start_ns >= step.cpu_start_ns
        )
        sets.append(names)
    if not any(sets):
        return None, ""
    count = Counter(sets).most_common(1)[0][1]
    if count * 2 > len(sets):  # most pieces run the same code: an iteration's period
        return True, ""
    common = frozenset.intersection(*sets)
    own = sorted(sets[0] - common) or sorted(sets[1] - common)
    example = f" (e.g. {own[0][:70]!r} in one of them only)" if own else ""
    return False, (f"the {len(steps)} repeats of the launch pattern run different host code"
                   f"{example}: they are parts of one iteration, such as layers, so the window "
                   "holds less than one period of the training loop")


def attach_phases(graph: OpGraph, steps: Sequence[Step]) -> None:
    """Fill each step's phases from phase-named ranges inside it on its thread, then name the
    position-named ones by the code they run (`advisor.graph.phase_content`)."""
    renamed: list[Renamed] = []
    for step in steps:
        step.phases = {}
        covered_until = -1
        for r in graph.ranges_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns):
            phase = phase_of(r.name)
            if phase is None or r.start_ns < covered_until:
                continue  # not a phase, or nested inside a phase range already taken
            step.phases.setdefault(phase, []).append((r.start_ns, min(r.end_ns, step.cpu_end_ns)))
            covered_until = r.end_ns
        renamed.extend(name_by_content(graph, step))
    if renamed:
        graph.info.notes.append(describe(renamed, len(steps)))


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


def keep_recorded(graph: OpGraph, recorded: Iterable[int]) -> None:
    """Drop the numbered step ranges whose number is not in ``recorded``: under `advisor
    profile`, steps that did not run to their end inside the recorded window. Inferred steps
    (the launch pattern) and step-like ranges without a number are kept. Part of loading
    (`advisor.ingest.base.LoadOptions.recorded_steps`): nothing changes the graph afterwards."""
    keep = set(recorded)
    inferred = graph.step_source is StepSource.LAUNCH_PATTERN
    kept = [s for s in graph.steps
            if inferred or step_number(s.name) in keep or step_number(s.name) is None]
    if len(kept) != len(graph.steps):
        graph.steps = kept
        if "steps" in graph.info.totals:
            graph.info.totals["steps"] = len(kept)


def phase_order(names: Iterable[str]) -> list[str]:
    """Phase names in execution order, known phases first."""
    names = set(names)
    return [p for p in PHASES if p in names] + sorted(names - set(PHASES))
