"""The HTML page's roofline: the step's kernels by arithmetic intensity and achieved TFLOP/s,
under the GPU's bandwidth and compute roofs, as inline SVG (no script, no external asset).

Log-log axes, as Williams, Waterman and Patterson draw it (*Roofline*, CACM 2009): the slanted
roof is peak bandwidth x intensity, the flat one the datatype's peak, meeting at the ridge
point. A kernel is a circle whose area follows its share of the listed kernels' time; memory-bound
operators without FLOPs have no intensity and are left to the table beside the chart.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

W, H, PAD = 520, 300, 44
X_RANGE = (0.1, 10_000.0)  # FLOP per byte


def _x(v: float) -> float:
    lo, hi = (math.log10(b) for b in X_RANGE)
    return PAD + (math.log10(min(max(v, X_RANGE[0]), X_RANGE[1])) - lo) / (hi - lo) * (W - 2 * PAD)


def roofline_svg(eff: dict[str, Any] | None) -> Markup | None:
    """The chart for the JSON ``efficiency`` section; None when there is nothing to place."""
    if not eff or not eff.get("peak_tflops") or not eff.get("peak_gbs"):
        return None
    placed = [k for k in eff.get("roofline") or () if k.get("intensity") and k.get("tflops")]
    if not placed:
        return None
    peak, bw = float(eff["peak_tflops"]), float(eff["peak_gbs"])
    y_hi = 10 ** math.ceil(math.log10(peak * 1.2))
    y_lo = y_hi / 1e4

    def y(v: float) -> float:
        v = min(max(v, y_lo), y_hi)
        return H - PAD - (math.log10(v / y_lo)) / 4 * (H - 2 * PAD)

    ridge = peak * 1e3 / bw
    roof = (f"M{_x(X_RANGE[0]):.1f},{y(X_RANGE[0] * bw / 1e3):.1f} "
            f"L{_x(ridge):.1f},{y(peak):.1f} L{_x(X_RANGE[1]):.1f},{y(peak):.1f}")
    total = sum(k["time_ms"] for k in placed) or 1.0
    dots = []
    for k in sorted(placed, key=lambda k: -k["time_ms"]):
        r = 3 + 14 * math.sqrt(k["time_ms"] / total)
        label = (f"{k['op']} {k.get('sizes') or ''} {k['precision']}: {k['tflops']:.0f} TFLOP/s, "
                 f"{k['intensity']:.0f} FLOP/B, {k['of_roof']:.0%} of roof, {k['time_ms']:.2f} ms")
        dots.append(f'<circle class="rf-dot rf-{escape(k["bound"] or "none")}" '
                    f'cx="{_x(k["intensity"]):.1f}" cy="{y(k["tflops"]):.1f}" r="{r:.1f}">'
                    f"<title>{escape(label)}</title></circle>")
    ticks = []
    for e in range(-1, 5):
        ticks.append(f'<text class="rf-tick" x="{_x(10 ** e):.1f}" y="{H - PAD + 14}" '
                     f'text-anchor="middle">{10 ** e:g}</text>')
    for e in range(5):
        v = y_lo * 10 ** e
        ticks.append(f'<text class="rf-tick" x="{PAD - 4}" y="{y(v) + 3:.1f}" '
                     f'text-anchor="end">{v:g}</text>')
    return Markup(
        f'<svg class="roofline" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="Roofline of the step\'s kernels">'
        f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" class="rf-frame"/>'
        f'<path d="{roof}" class="rf-roof"/>{"".join(ticks)}{"".join(dots)}'
        f'<text class="rf-axis" x="{W / 2}" y="{H - 6}" text-anchor="middle">'
        f"arithmetic intensity (FLOP/byte)</text>"
        f'<text class="rf-axis" x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" '
        f'text-anchor="middle">TFLOP/s ({escape(eff.get("precision") or "")})</text></svg>')
