"""Union of time intervals: how long a set of possibly overlapping spans covers, the gaps
between them, and the merged spans. The step breakdown (GPU busy and idle per step), the
whole-trace summary, the CPU-bound-loss rule (GPU idle inside the loss), the job summaries
(compute, communication) and the compiled regions a CUDA graph would capture all use these."""

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


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``intervals`` as sorted, disjoint spans (touching ones joined, empty dropped)."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]
