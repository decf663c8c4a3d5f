"""Step times read from public training scripts' own logs, for tests and the device scripts
(benchmarks/public/lightning_steps.py prints them): never advisor's clock (issue 35 item 6).

Lightning's training bar is tqdm with ``smoothing=0``: at every refresh it prints ``n/total`` and
the rate since the epoch's bar started (``R it/s`` or ``R s/it``), so ``n / rate`` is the elapsed
time at step ``n`` to four significant figures, and the bar restarts at every epoch. Per epoch,
the settled step is (elapsed at its last refresh - elapsed at its first refresh with ``n >=
from_step``) / the steps between: the epoch's start (worker processes forking, the first
batches) is left out, as advisor's settled steps leave it out. The run's figure is the mean over
its epochs, weighted by steps.
"""

from __future__ import annotations

import re

BAR = re.compile(r"Epoch (?P<epoch>\d+):[^\r\n]*?\|\s*(?P<n>\d+)/(?P<total>\d+) \[[\d:]+<[^,\]]*,\s*"
                 r"(?P<rate>[\d.]+)(?P<unit>it/s|s/it)")


def elapsed_points(text: str) -> dict[int, list[tuple[int, float]]]:
    """Epoch -> [(n, elapsed seconds)] from every refresh of the training bar."""
    out: dict[int, list[tuple[int, float]]] = {}
    for m in BAR.finditer(text):
        n, rate = int(m["n"]), float(m["rate"])
        if n == 0 or rate == 0:
            continue
        elapsed = n / rate if m["unit"] == "it/s" else n * rate
        out.setdefault(int(m["epoch"]), []).append((n, elapsed))
    return out


def settled(text: str, from_step: int = 10) -> dict:
    spans = []
    for epoch, pts in sorted(elapsed_points(text).items()):
        later = [p for p in pts if p[0] >= from_step]
        if len(later) < 2 or later[-1][0] == later[0][0]:
            continue
        (n0, e0), (n1, e1) = later[0], later[-1]
        spans.append({"epoch": epoch, "from": n0, "to": n1, "ms": 1e3 * (e1 - e0) / (n1 - n0)})
    steps = sum(s["to"] - s["from"] for s in spans)
    mean = sum(s["ms"] * (s["to"] - s["from"]) for s in spans) / steps if steps else None
    return {"epochs": spans, "steps": steps, "step_ms": mean}
