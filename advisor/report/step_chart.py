"""The step-time chart: every step in order, with the distribution beside it.

A step-time problem is either drift (steps slow down over the run), jitter (random slow steps,
often the input pipeline) or neither; a time series shows the first two and a histogram the
shape, so the chart is both. The y axis spans the steady steps, not zero, so a 3% jitter is
visible; that is honest for points and a line, never for bars. Warm-up steps far above the range
are pinned to the top edge and keep their value in the tooltip.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.report.html_view import fmt_ms, fmt_pct


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    cls: str  # "steady" | "warmup" | "rep"
    label: str
    clipped: bool  # above the plot: drawn on its top edge


@dataclass(frozen=True)
class HistBar:
    y: float
    h: float
    w: float
    label: str


@dataclass(frozen=True)
class StepChart:
    width: int
    height: int
    left: int
    top: int
    right: int  # x where the series ends
    bottom: int  # y of the x axis
    hist_x: int
    points: list[Point]
    line: str  # SVG polyline points through the steady steps
    radius: float
    median_y: float
    band: tuple[float, float]  # p10-p90, as (y top, y bottom)
    yticks: list[tuple[float, str]]
    xticks: list[tuple[float, str, bool]]  # x, step number, is the timeline's step
    hist: list[HistBar]
    stats: list[tuple[str, str]]


def nice(x: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten that is at least x."""
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= x)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _stats(steady: list[float]) -> list[tuple[str, str]]:
    median = statistics.median(steady)
    mean = statistics.fmean(steady)
    cv = statistics.pstdev(steady) / mean if mean and len(steady) > 1 else 0.0
    return [
        ("traced median", fmt_ms(median)),
        ("p10 – p90", f"{fmt_ms(percentile(steady, 0.1))} – {fmt_ms(percentile(steady, 0.9))}"),
        ("min – max", f"{fmt_ms(steady[0])} – {fmt_ms(steady[-1])}"),
        ("jitter (CV)", fmt_pct(cv, 1)),
        ("worst / median", f"{steady[-1] / median:.2f}×" if median else "–"),
    ]


def step_chart(times_ms: Sequence[float | None], warmup: Sequence[bool], numbers: Sequence[int],
               rep: int | None, width: int = 720, height: int = 190) -> StepChart | None:
    """The chart of every step found (warm-up greyed, the timeline's step marked), or None."""
    pairs = [(i, t) for i, t in enumerate(times_ms) if t is not None]
    if not pairs:
        return None
    is_warm = [i < len(warmup) and warmup[i] for i in range(len(times_ms))]
    steady = sorted(t for i, t in pairs if not is_warm[i]) or sorted(t for _, t in pairs)
    median = statistics.median(steady)
    lo, hi = steady[0], steady[-1]
    pad = max((hi - lo) * 0.2, median * 0.03, 1e-6)
    tick = nice((hi - lo + 2 * pad) / 4)
    y_min = max(0.0, math.floor((lo - pad) / tick) * tick)
    y_max = math.ceil((hi + pad) / tick) * tick

    left, top, hist_w = 58, 8, 96
    bottom = height - 22
    hist_x = width - 8 - hist_w
    right = hist_x - 18
    n = len(times_ms)
    slot = (right - left) / n

    def y(ms: float) -> float:
        return bottom - (bottom - top) * (min(max(ms, y_min), y_max) - y_min) / (y_max - y_min)

    points: list[Point] = []
    for i, t in pairs:
        cls = "rep" if i == rep else ("warmup" if is_warm[i] else "steady")
        kind = {"rep": "drawn in the timeline", "warmup": "warm-up", "steady": "steady"}[cls]
        number = numbers[i] if i < len(numbers) else i
        points.append(Point(round(left + (i + 0.5) * slot, 2), round(y(t), 2), cls,
                            f"step {number}: {fmt_ms(t)} ({kind})", t > y_max or t < y_min))
    line = " ".join(f"{p.x},{p.y}" for p in points if p.cls != "warmup")
    every = max(1, math.ceil(n / max(1, (right - left) // 30)))
    xticks = [(round(left + (i + 0.5) * slot, 2), str(numbers[i] if i < len(numbers) else i), i == rep)
              for i in range(n) if i % every == 0 or i == rep]
    if rep is not None:  # a neighbour's label would overprint the marked step's
        xticks = [t for t in xticks if t[2] or abs(t[0] - (left + (rep + 0.5) * slot)) >= 22]
    yticks = [(round(y(y_min + k * tick), 2), fmt_ms(y_min + k * tick))
              for k in range(round((y_max - y_min) / tick) + 1)]
    bins = max(4, min(14, len(steady) // 2))
    width_ms = (y_max - y_min) / bins
    counts = [0] * bins
    for t in steady:
        counts[min(bins - 1, max(0, int((t - y_min) / width_ms)))] += 1
    most = max(counts) or 1
    hist = [HistBar(round(y(y_min + (b + 1) * width_ms), 2), round((bottom - top) / bins - 1, 2),
                    round(hist_w * c / most, 2),
                    f"{c} step{'s' if c != 1 else ''} in {fmt_ms(y_min + b * width_ms)} – "
                    f"{fmt_ms(y_min + (b + 1) * width_ms)}")
            for b, c in enumerate(counts) if c]
    return StepChart(
        width, height, left, top, right, bottom, hist_x, points, line,
        4.0 if n <= 40 else 2.5 if n <= 150 else 0.0, round(y(median), 2),
        (round(y(percentile(steady, 0.9)), 2), round(y(percentile(steady, 0.1)), 2)),
        yticks, xticks, hist, _stats(steady),
    )
