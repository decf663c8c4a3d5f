"""Union of time intervals: how long a set of possibly overlapping spans covers, and the gaps
between them. The step breakdown (GPU busy and idle per step), the whole-trace summary and the
CPU-bound-loss rule (GPU idle inside the loss) all measure coverage this one way."""

from __future__ import annotations

from collections.abc import Iterable


def union_length(intervals: Iterable[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
    """Total length covered by ``intervals`` (start, end), and the gaps between the merged ones."""
    spans = sorted(intervals)
    if not spans:
        return 0, []
    total, gaps = 0, []
    cur_s, cur_e = spans[0]
    for s, e in spans[1:]:
        if s > cur_e:
            total += cur_e - cur_s
            gaps.append((cur_e, s))
            cur_s, cur_e = s, e
        elif e > cur_e:  # (not ``max``: a call per interval, and steps hold 10^4 of them)
            cur_e = e
    total += cur_e - cur_s
    return total, gaps
