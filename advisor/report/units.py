"""Times and sizes as the reports show them: one place for every conversion and format.

The graph keeps nanoseconds; users read milliseconds. Two text styles exist on purpose:

- `fmt_ns`/`fmt_ms` (HTML page, its timeline): the unit that keeps 3-4 significant digits
  (``812 µs``, ``14.13 ms``), for numbers read one at a time;
- `console_ms` (terminal): always ms with three decimals (``14.128 ms``), so a column of them
  lines up and the README's examples stay what the console prints.

`to_ms` is the JSON's number (ms, rounded to 0.1 µs), not text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def to_ms(ns: float | None) -> float | None:
    """Nanoseconds as the JSON result's milliseconds (None stays None)."""
    return None if ns is None else round(ns / 1e6, 4)


def console_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def fmt_ns(ns: float | None) -> str:
    """A duration in the unit that keeps 3-4 significant digits; ``–`` for none."""
    if ns is None:
        return "–"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.4g} s" if a < 1e12 else f"{ns / 1e9:,.0f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.4g} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.0f} ns"


def fmt_ms(ms: float | None) -> str:
    """`fmt_ns` of a duration given in ms (the JSON's unit)."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "–"
    return fmt_ns(ms * 1e6)


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def share(part: float | None, whole: float | None) -> float | None:
    """``part`` as a share of ``whole``, within [0, 1]: a part of a step cannot exceed it.

    A larger ratio means the two were measured on different bases (a profiled idle time over
    a measured unprofiled step, issue 32: "GPU idle 246.9%"); capping keeps the bar and the
    figure readable, and `tests/report` checks no report shows one above 100%."""
    if part is None or not whole or whole <= 0:
        return None
    return min(1.0, max(0.0, part / whole))


def number_runs(numbers: Iterable[int], dash: str = "–") -> str:
    """``6, 7, 8, 10`` as ``6–8, 10`` (steps, ranks): consecutive numbers as one run."""
    xs = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}{dash}{xs[j]}")
        i = j + 1
    return ", ".join(parts)
