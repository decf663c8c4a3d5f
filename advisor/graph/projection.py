"""Project host timestamps onto the GPU's timeline.

The host usually runs ahead of the GPU, so a CPU range (a step, a phase) ends long before the
work it launched has run. The GPU-side moment that corresponds to host time ``t`` is when the
GPU has finished everything launched before ``t``, or ``t`` itself if the GPU was already idle
then: ``max(t, end of the latest-ending op launched before t)``. Consecutive boundaries projected
this way split GPU time exactly, so phase times add up to the step time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.graph.model import OpGraph

_BEFORE_ALL = -(2**62)


class Projector:
    """Answers `gpu_time(pid, t)` in O(log n) after one O(n log n) pass over the GPU ops."""

    def __init__(self, graph: OpGraph) -> None:
        launches: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for op in graph.gpu_ops:
            call = graph.launcher(op)
            # An op launched before tracing began comes before every boundary; any other op
            # whose launch is not in the trace was launched no later than it started.
            if call is not None:
                launched_at = call.start_ns
            elif graph.launched_before_trace(op):
                launched_at = _BEFORE_ALL
            else:
                launched_at = op.start_ns
            launches[op.pid].append((launched_at, op.end_ns))
        self._index: dict[int, tuple[list[int], list[int]]] = {}
        for pid, pairs in launches.items():
            pairs.sort()
            times, prefix_max_end, best = [], [], _BEFORE_ALL
            for launched_at, end in pairs:
                best = max(best, end)
                times.append(launched_at)
                prefix_max_end.append(best)
            self._index[pid] = (times, prefix_max_end)

    def gpu_time(self, pid: int, t_ns: int) -> int:
        times, prefix_max_end = self._index.get(pid, ([], []))
        i = bisect_left(times, t_ns)  # ops launched strictly before t
        if i == 0:
            return t_ns
        return max(t_ns, prefix_max_end[i - 1])

    def has_gpu_work(self, pid: int) -> bool:
        return pid in self._index
