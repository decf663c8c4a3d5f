"""Python stacks sampled beside an nsys capture -> the graph's Python-frame ranges.

`advisor profile --nsys` samples the training thread's Python stack while the window records
(`advisor.capture.pystacks`) and writes ``pystacks_rank<R>.json.gz`` beside the export
``nsys_rank<R>.sqlite``. The samples carry the process's ``perf_counter_ns``; the export has its
own clock. Both record the same steps: the session writes each step's start and end in its clock
(``step_times``, relative to ``run_start_ns``, in ``capture_rank<R>.json`` and
``steps_rank<R>.json``) and emits the same steps as the NVTX ranges ``step N`` the export holds.
So the clocks are tied by a least-squares line through the (session, export) pairs of every
step's start and end (`fit_clock`), and the fit is checked: its slope within `MAX_SLOPE_ERROR` of
1 (two monotonic clocks of one machine tick at one rate; H100 capture: 15 ppm) and no step edge
further than `MAX_RESIDUAL_NS` from the line (H100 capture: 5.4 us). A fit that fails is said in
the graph's notes and the samples are dropped: misplaced frames would name the wrong lines.

The samples then become nested ranges on the steps' thread (`sample_ranges`), named as
torch.profiler names its ``python_function`` events (``train.py(116): get_batch``), so the
source-lines machinery (`advisor.graph.source_lines`) reads an nsys capture as a torch.profiler
one. A frame runs from halfway between the sample before it appeared and the first sample that
shows it, to halfway between the last sample that shows it and the next: each sample stands for
the time around it. Sampling sees a frame only if it ran across a sample, so short calls are
missed or merged; what it costs and how often it samples are in docs/profile.md.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from advisor.errors import InputError
from advisor.graph.model import SAMPLED, CpuRange, OpGraph, RangeSource, StepSource
from advisor.ingest.compression import UNPACK_ERRORS
from advisor.ingest.input_file import CappedReader, UnpackLimits

STACKS_FILE = "pystacks_{tag}.json.gz"
CLOCK_FILES = ("capture_{tag}.json", "steps_{tag}.json")
"""Where the session's step clock is: its status file (written when the window closes), then
the step clock it hands to the analysis beside the job."""
FORMAT = "advisor-pystacks"
MAX_SLOPE_ERROR = 1e-3
MAX_RESIDUAL_NS = 250_000
"""A quarter of the 1 ms sampling interval: an alignment error below it moves no frame further
than sampling itself does."""
LIMITS = UnpackLimits(max_bytes=1 << 30, max_ratio=200.0)
_RANK_TAG = re.compile(r"_(rank\d+)")


@dataclass(frozen=True)
class ClockFit:
    """export_ns = slope * session_ns + offset, from ``points`` step edges."""

    slope: float
    offset: float
    points: int
    max_residual_ns: float

    def __call__(self, t: float) -> int:
        return round(self.slope * t + self.offset)

    @property
    def problem(self) -> str | None:
        """Why the fit cannot be trusted, or None."""
        if self.max_residual_ns > MAX_RESIDUAL_NS:
            return (f"a step edge is {self.max_residual_ns / 1e3:.0f} us off the fitted line "
                    f"(at most {MAX_RESIDUAL_NS / 1e3:.0f} us)")
        if abs(self.slope - 1.0) > MAX_SLOPE_ERROR:
            return f"the clocks' rates differ by {abs(self.slope - 1.0):.2%}"
        return None


@dataclass
class Samples:
    """A pystacks file: absolute ``perf_counter_ns`` stamps, each with a stack of frames."""

    times: list[int]
    stack_ids: list[int]
    stacks: list[list[int]]  # frame indexes, outermost first
    frames: list[tuple[str, int, str]]
    interval_ns: int


def fit_clock(pairs: list[tuple[int, int]]) -> ClockFit | None:
    """The line through (session_ns, export_ns) pairs; with one step's two edges only, slope 1
    (two points fit any line: the check would be empty)."""
    if not pairs:
        return None
    xs = [float(x) for x, _ in pairs]
    ys = [float(y) for _, y in pairs]
    if len(pairs) >= 4 and max(xs) > min(xs):
        slope, offset = statistics.linear_regression(xs, ys)
    else:
        slope, offset = 1.0, statistics.fmean(y - x for x, y in zip(xs, ys))
    worst = max(abs(y - (slope * x + offset)) for x, y in zip(xs, ys))
    return ClockFit(slope, offset, len(pairs), worst)


def read_samples(path: Path) -> Samples:
    """The samples file, checked; `InputError` with one sentence when it is not one."""
    try:
        with CappedReader(path, LIMITS) as f:
            doc = json.loads(f.read())
    except (OSError, *UNPACK_ERRORS, ValueError, RecursionError) as e:
        raise InputError(f"{path.name}: not a readable samples file ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != 1:
        raise InputError(f"{path.name}: not an advisor pystacks file (version 1)")
    try:
        frames = [(str(f), int(ln), str(fn)) for f, ln, fn in doc["frames"]]
        stacks = [[int(i) for i in s] for s in doc["stacks"]]
        times: list[int] = []
        t = 0
        for d in doc["t"]:
            t += int(d)
            times.append(t)
        ids = [int(i) for i in doc["stack"]]
        interval = int(doc["interval_ns"])
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path.name}: malformed samples file ({e})") from e
    if len(ids) != len(times) or any(not 0 <= i < len(stacks) for i in ids) or any(
            not 0 <= k < len(frames) for s in stacks for k in s) or interval <= 0:
        raise InputError(f"{path.name}: malformed samples file (indexes out of range)")
    if any(b < a for a, b in pairwise(times)):
        raise InputError(f"{path.name}: malformed samples file (stamps out of order)")
    return Samples(times, ids, stacks, frames, interval)


def read_step_clock(folder: Path, tag: str) -> tuple[int, dict[int, tuple[int, int]]] | None:
    """``run_start_ns`` and step index -> (start, end) on the session's clock, or None."""
    for name in CLOCK_FILES:
        path = folder / name.format(tag=tag)
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        state = doc.get("state", doc) if isinstance(doc, dict) else None
        if not isinstance(state, dict):
            continue
        try:
            origin = int(state.get("run_start_ns") or 0)
            steps = {int(i): (int(b), int(e)) for i, b, e in state.get("step_times") or []}
        except (TypeError, ValueError):
            continue
        if origin and steps:
            return origin, steps
    return None


def sample_ranges(samples: Samples, to_export, pid: int, tid: int, first_id: int) -> list[CpuRange]:
    """Nested Python-frame ranges from the samples (see the module docstring)."""
    names = [f"{file}({line}): {function}" for file, line, function in samples.frames]
    out: list[CpuRange] = []
    opened: list[tuple[int, int]] = []  # (frame index, start) from the outermost frame
    prev: int | None = None

    def close(upto: int, keep: int) -> None:
        # Outer frames first: frames seen in the same samples (``runpy._run_code`` and the
        # script's ``<module>`` it runs) start and end together, and the graph orders its
        # ranges by (start, -end), keeping the given order on ties. Appended inner first, the
        # script's ``<module>`` became the parent of runpy's frames and every line of the
        # training loop read ``train.py <module> -> _run_code``.
        gone = opened[keep:]
        del opened[keep:]
        for k, start in gone:
            if upto > start:
                out.append(CpuRange(first_id + len(out), names[k], start, upto, pid, tid,
                                    RangeSource.PYTHON, domain=SAMPLED))

    for t, sid in zip(samples.times, samples.stack_ids):
        now = to_export(t)
        edge = now if prev is None else (prev + now) // 2
        stack = samples.stacks[sid]
        common = 0
        while (common < len(opened) and common < len(stack)
               and opened[common][0] == stack[common]):
            common += 1
        close(edge, common)
        opened.extend((k, edge) for k in stack[common:])
        prev = now
    if prev is not None:
        close(prev + samples.interval_ns // 2, 0)
    return out


def stacks_beside(trace: Path) -> tuple[Path, str] | None:
    """The samples file beside an export named like ``nsys_rank0.sqlite``, and its rank tag."""
    m = _RANK_TAG.search(trace.name)
    if m is None:
        return None
    path = trace.parent / STACKS_FILE.format(tag=m.group(1))
    return (path, m.group(1)) if path.is_file() else None


def attach(graph: OpGraph, trace: Path) -> None:
    """Add the Python-frame ranges of the samples beside ``trace`` to ``graph`` (an nsys
    export), or a note saying why they were left out; nothing when there is no samples file."""
    found = stacks_beside(trace)
    if found is None:
        return
    path, tag = found
    note = _attach(graph, path, tag)  # "" when attached
    if note:
        graph.info.notes.append(note)


def _attach(graph: OpGraph, path: Path, tag: str) -> str:
    steps = [s for s in graph.steps if not s.warmup] or graph.steps
    if not steps or graph.step_source is not StepSource.RANGES:
        return f"{path.name} left out: the export has no step ranges to align its clock with"
    clock = read_step_clock(path.parent, tag)
    if clock is None:
        return (f"{path.name} left out: no step clock beside it (capture_{tag}.json or "
                f"steps_{tag}.json with run_start_ns), so its samples cannot be placed")
    try:
        samples = read_samples(path)
    except InputError as e:
        return f"{e}; left out"
    origin, times = clock
    pairs: list[tuple[int, int]] = []
    for s in graph.steps:
        if s.index in times:
            b, e = times[s.index]
            pairs += [(b, s.cpu_start_ns), (e, s.cpu_end_ns)]
    fit = fit_clock(pairs)
    if fit is None:
        return f"{path.name} left out: none of the export's steps is in the step clock beside it"
    if fit.problem:
        return (f"{path.name} left out: its clock does not line up with the export's over "
                f"{fit.points // 2} steps ({fit.problem})")
    pid, tid = steps[0].pid, steps[0].tid
    first_id = 1 + max((r.id for r in graph.ranges), default=0)
    new = sample_ranges(samples, lambda t: fit(t - origin), pid, tid, first_id)
    if not new:
        return f"{path.name}: no samples"
    graph.ranges = sorted([*graph.ranges, *new], key=lambda r: (r.start_ns, -r.end_ns))
    for cached in ("_ranges_by_thread", "_range_parents", "launching_ops"):  # from the old list
        graph.__dict__.pop(cached, None)
    graph.info.totals["python_samples"] = len(samples.times)
    return ""


def describe(samples: Samples) -> dict[str, Any]:
    """Counts for tests and logs."""
    span = (samples.times[-1] - samples.times[0]) if samples.times else 0
    return {"samples": len(samples.times), "stacks": len(samples.stacks),
            "frames": len(samples.frames),
            "rate_hz": (len(samples.times) - 1) / (span / 1e9) if span else 0.0}
