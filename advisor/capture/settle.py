"""When the step time has settled: the recorded window starts there unless ``--wait`` or
``--window-at`` pins it.

The first steps of a job are not its steady state: kernels are compiled or autotuned
(``torch.compile``, ``cudnn.benchmark``), the caching allocator grows, DataLoader workers fill
their prefetch queues and the loop first eats what they prefetched. A window at a fixed step
number records some of that on one job and wastes steps on another. Three conditions, all
checked at every step boundary before the window:

* **The running mean is stable**: the mean of the last `SETTLE_BLOCK` step times is within
  `SETTLE_TOLERANCE` of the mean of the block before. The mean, not the median: a loader that
  delivers in bursts (three steps of 60 ms, then one of 700 ms) has blocks whose medians agree
  from the first steps on, while the step the job pays is the mean (issue 32: a window opened on
  medians recorded 58 ms steps of a job that paid 179 ms per step).
* **The data wait no longer drifts**: the mean time per step spent waiting for the next batch
  (the session times every DataLoader ``__next__``) differs between the two blocks by less than
  `SETTLE_TOLERANCE` of the step.
* **The prefetched batches are consumed**: a DataLoader with ``num_workers`` workers and
  ``prefetch_factor`` has that many batches ready before the first step; until the loop has
  drawn them, its steps do not wait for the workers at all, however slow they are (the public
  ImageNet example with 7 workers: 15 steps of 58 ms, then bursts of 300-600 ms).

A job whose steps never meet them starts at `SETTLE_MAX_WAIT` anyway, and says so. Every
decision comes with its reason, which the reports print.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

SETTLE_BLOCK = 8
"""Steps per compared block: the window starts no earlier than step ``2 * SETTLE_BLOCK``. Eight,
so that a burst every two to four steps (a loader's workers catching up) falls in both blocks
alike and does not hold the window off by itself."""

SETTLE_TOLERANCE = 0.10
"""Blocks whose means differ by less than this fraction show no warm-up trend: the same 10%
that bounds advisor's step-time error, so a window started here is representative to it."""

SETTLE_MAX_WAIT = 40
"""Steps after which the window starts even if the step time has not settled (a jittery,
loader-bound job may never settle to 10%, and must still be recorded)."""


def settle_reason(step_times: Sequence[float], data_waits: Sequence[float] = (),
                  prefetched: int = 0, consumed: int = 0) -> str | None:
    """Why the step time counts as settled now, or None while it does not.

    ``data_waits``: the data wait of the same steps (empty when no DataLoader was seen);
    ``prefetched``: batches the loader had ready before the loop drew any
    (``num_workers * prefetch_factor``); ``consumed``: batches drawn so far."""
    b = SETTLE_BLOCK
    if len(step_times) < 2 * b:
        return None
    last = statistics.fmean(step_times[-b:])
    before = statistics.fmean(step_times[-2 * b:-b])
    if before <= 0 or abs(last - before) > SETTLE_TOLERANCE * before:
        return None
    why = (f"the mean step of the last {b} steps ({last / 1e6:.3f} ms) is within "
           f"{SETTLE_TOLERANCE:.0%} of the {b} before ({before / 1e6:.3f} ms)")
    if len(data_waits) >= 2 * b:
        w_last = statistics.fmean(data_waits[-b:])
        w_before = statistics.fmean(data_waits[-2 * b:-b])
        if abs(w_last - w_before) > SETTLE_TOLERANCE * last:
            return None
        why += (f", the data wait per step no longer drifts ({w_before / 1e6:.3f} -> "
                f"{w_last / 1e6:.3f} ms)")
    if prefetched:
        if consumed < prefetched:
            return None
        why += f", the loader's {prefetched} prefetched batches are consumed"
    return why


def settled(step_times: Sequence[float], data_waits: Sequence[float] = (),
            prefetched: int = 0, consumed: int = 0) -> bool:
    """Whether the step time has settled (see `settle_reason`)."""
    return settle_reason(step_times, data_waits, prefetched, consumed) is not None


def prefetched_batches(loader: dict | None) -> int:
    """Batches a DataLoader holds ready before the loop draws any: ``num_workers`` times its
    ``prefetch_factor`` (2 when unset); none without workers (batches are made on demand)."""
    if not loader:
        return 0
    workers = int(loader.get("num_workers") or 0)
    factor = loader.get("prefetch_factor")
    return workers * int(factor if factor else 2) if workers > 0 else 0
