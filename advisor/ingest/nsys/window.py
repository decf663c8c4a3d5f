"""Which part of a long trace to load in detail.

Memory must follow the analysis window, not the trace: a 1-hour capture has millions of
kernels, yet a diagnosis needs a few dozen steady-state steps. The window is chosen from cheap
whole-trace facts (the step ranges, row counts) before any detailed row is read:

* With step ranges: up to ``max_steps`` steady steps on the busiest step thread, after the
  warm-up, plus one lead-in step before them (build_graph marks a thread's first step as
  warm-up, so the lead-in keeps ``max_steps`` steady ones). Other ranks' steps overlapping that
  time join it.
* Without: the whole trace when its GPU ops fit ``max_gpu_ops``, else a slice of about that many
  ops from the middle of the trace, away from start-up and shutdown.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from advisor.graph.model import Step
from advisor.graph.steps import WARMUP_SLOW_FACTOR

WHOLE_START = -(2**62)
WHOLE_END = 2**62


@dataclass(frozen=True)
class Window:
    """[start_ns, end_ns) on the trace clock, and the steps analysed in it (None: find them)."""

    start_ns: int
    end_ns: int
    steps: list[Step] | None
    description: str = ""

    @property
    def whole(self) -> bool:
        return self.start_ns <= WHOLE_START and self.end_ns >= WHOLE_END


def warmup_count(durations: list[int]) -> int:
    """Leading steps still warming up: the first, and any far slower than the median of the rest.

    Same criterion as `advisor.graph.steps.mark_warmup`, on CPU durations because GPU times are
    not known before the detailed rows are read.
    """
    if len(durations) < 3:
        return min(1, len(durations))
    median = statistics.median(durations[1:])
    count = 1
    for d in durations[1:-2]:
        if d <= WARMUP_SLOW_FACTOR * median:
            break
        count += 1
    return count


def step_window(steps: list[Step], max_steps: int) -> Window:
    """The window of up to ``max_steps`` steady steps (plus a lead-in) described above."""
    per_thread: dict[tuple[int, int], list[Step]] = defaultdict(list)
    for s in steps:
        per_thread[(s.pid, s.tid)].append(s)
    for thread_steps in per_thread.values():
        thread_steps.sort(key=lambda s: s.cpu_start_ns)
    primary_key = max(per_thread, key=lambda k: (len(per_thread[k]), -per_thread[k][0].cpu_start_ns))
    primary = per_thread[primary_key]
    n = len(primary)
    if n <= max_steps + 1:
        chosen = primary
    else:
        steady_from = warmup_count([s.cpu_ns for s in primary])
        first = max(0, min(steady_from, n - max_steps - 1))
        chosen = primary[first : first + max_steps + 1]
    t0, t1 = chosen[0].cpu_start_ns, chosen[-1].cpu_end_ns
    others = [
        s
        for key, thread_steps in per_thread.items()
        if key != primary_key
        for s in thread_steps
        if s.cpu_start_ns < t1 and s.cpu_end_ns > t0
    ]
    start = min([t0] + [s.cpu_start_ns for s in others])
    end = max([t1] + [s.cpu_end_ns for s in others])
    picked = chosen + others
    what = (f"steps {chosen[0].name!r}..{chosen[-1].name!r}: {len(chosen)} of {n} on the "
            f"busiest step thread")
    if others:
        what += f", plus {len(others)} overlapping steps of other threads/ranks"
    return Window(start, end, picked, what)


def op_window(total_ops: int, max_ops: int, span: tuple[int, int] | None) -> Window:
    """The whole trace when small enough, else a slice of about ``max_ops`` ops mid-trace.

    Assumes ops are spread evenly over the span: a slice off by a factor of a few is harmless,
    since the loader also caps the rows it reads.
    """
    if total_ops <= max_ops or span is None or span[1] <= span[0]:
        return Window(WHOLE_START, WHOLE_END, None, "the whole trace")
    length = max(1, (span[1] - span[0]) * max_ops // total_ops)
    middle = (span[0] + span[1]) // 2
    start = middle - length // 2
    return Window(start, start + length, None,
                  f"about {max_ops} of {total_ops} GPU ops from the middle of the trace "
                  "(no step ranges)")
