"""When the step time has settled: the recorded window starts there unless ``--wait`` pins it.

The first steps of a job are not its steady state: kernels are compiled or autotuned
(``torch.compile``, ``cudnn.benchmark``), the caching allocator grows, DataLoader workers fill
their prefetch queues. A window at a fixed step number records some of that on one job and
wastes steps on another. Instead, the session compares the median of the last `SETTLE_BLOCK`
step times with the median of the block before: once they agree within `SETTLE_TOLERANCE`, the
warm-up trend is over. Medians, so one slow step (a checkpoint, a worker hiccup) neither starts
nor blocks the window; a job whose steps never agree starts at `SETTLE_MAX_WAIT` anyway.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

SETTLE_BLOCK = 4
"""Steps per compared block: the window starts no earlier than step ``2 * SETTLE_BLOCK``."""

SETTLE_TOLERANCE = 0.10
"""Blocks whose medians differ by less than this fraction show no warm-up trend: the same 10%
that bounds advisor's step-time error, so a window started here is representative to it."""

SETTLE_MAX_WAIT = 40
"""Steps after which the window starts even if the step time has not settled (a jittery,
loader-bound job never settles to 10%, and must still be recorded)."""


def settled(step_times: Sequence[int | float]) -> bool:
    """Whether the last two blocks of step times agree (see the module docstring)."""
    if len(step_times) < 2 * SETTLE_BLOCK:
        return False
    last = statistics.median(step_times[-SETTLE_BLOCK:])
    before = statistics.median(step_times[-2 * SETTLE_BLOCK:-SETTLE_BLOCK])
    if before <= 0:
        return False
    return abs(last - before) <= SETTLE_TOLERANCE * before
