"""What the HTML template shows, computed from the report model (`advisor.report.model`).

The template only lays things out; every number it prints is formatted here, from the model or
the dictionary the JSON report writes of it, so the two reports cannot disagree. Units follow the
evidence naming contract (`advisor.engine.rule.Evidence`): a quantity's unit is its suffix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from advisor.report import palette
from advisor.report.units import fmt_bytes, fmt_ms, fmt_ns, number_runs, share

# ----- number formatting -------------------------------------------------------------------


def fmt_pct(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x * 100:.{digits}f}%"


def fmt_x(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def fmt_count(x: float) -> str:
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.0f}"


_WORDS = {"gpu": "GPU", "cpu": "CPU", "gemm": "GEMM", "gemms": "GEMMs", "fp32": "FP32", "fp8": "FP8",
          "rng": "RNG", "cv": "CV", "gelu": "GELU", "api": "API", "nccl": "NCCL", "d2h": "D2H"}
_UNITS = (
    ("_ns_per_step", "time/step"), ("_bytes_per_step", "bytes/step"), ("_gb_per_s", "GB/s"),
    ("_per_step", "count/step"), ("_ns", "time"), ("_bytes", "bytes"), ("_share", "share"),
    ("_fraction", "share"), ("_ratio", "ratio"),
)


def _humanize(stem: str) -> str:
    words = [_WORDS.get(w, w) for w in stem.split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def _with_unit(unit: str, label: str, value: float) -> tuple[str, str]:
    if unit == "time/step":
        return f"{label} time", f"{fmt_ns(value)} / step"
    if unit == "bytes/step":
        return f"{label} bytes", f"{fmt_bytes(value)} / step"
    if unit == "count/step":
        return label, f"{fmt_count(value)} / step"
    if unit == "time":
        return f"{label} time", fmt_ns(value)
    if unit == "bytes":
        return f"{label} bytes", fmt_bytes(value)
    if unit == "GB/s":
        return f"{label} bandwidth", f"{value:.3g} GB/s"
    if unit == "share":
        return f"{label} share", fmt_pct(share(value, 1.0), 1)
    return label, f"{value:.3g}"


def quantity(key: str, value: float) -> tuple[str, str]:
    """(label, formatted value) for an evidence quantity named ``<what>_<unit>``."""
    if key.endswith("_cv"):  # a coefficient of variation: a share that names itself
        return _humanize(key), fmt_pct(value, 1)
    for suffix, unit in _UNITS:
        if key.endswith(suffix):
            return _with_unit(unit, _humanize(key[: -len(suffix)]), value)
    return _humanize(key), fmt_count(value)


def step_ranges(steps: Iterable[int]) -> str:
    """``6, 7, 8, 10`` as ``6–8, 10``."""
    return number_runs(steps)


# ----- bars for categories, phases, idle causes ---------------------------------------------


@dataclass(frozen=True)
class Share:
    label: str
    ms: float
    share: float  # of the reference total, 0..1
    cls: str  # palette class key ("" for neutral)


def shares(items: dict[str, float | None], total: float | None,
           cls_of: Callable[[str], str]) -> list[Share]:
    """Rows for a bar table; shares are of ``total``, or of the items' sum without one."""
    ref = total if total else sum(v or 0.0 for v in items.values()) or 1.0
    return [Share(k, v or 0.0, share(v or 0.0, ref) or 0.0, cls_of(k)) for k, v in items.items() if v]


# ----- headline ----------------------------------------------------------------------------


def gpu_label(gpus: list[dict[str, Any]]) -> str:
    """``2 × NVIDIA H100 80GB HBM3`` for the GPUs the trace names."""
    names: dict[str, int] = {}
    for g in gpus:
        names[g["name"]] = names.get(g["name"], 0) + 1
    if not names:
        return "GPU not recorded in the trace"
    return ", ".join(f"{n} × {name}" if n > 1 else name for name, n in names.items())


def software_items(trace: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, version) of the software the trace records: profiler, CUDA, driver, NCCL."""
    items = [(k, str(v)) for k, v in trace.get("software", {}).items()]
    if trace.get("tool_version") and not any(v == trace["tool_version"] for _, v in items):
        items.append(("tool", trace["tool_version"]))
    return items


def trace_name(path: str) -> str:
    return PurePath(path).name or path


# ----- findings ----------------------------------------------------------------------------

def finding_view(f: dict[str, Any], step_ms: float | None, shown: list[str]) -> dict[str, Any]:
    """A finding of `to_dict` with its numbers formatted; ``shown``: its events in the timeline."""
    ev = f["evidence"]
    step_ms = f.get("step_ms") or step_ms  # the estimate's own base (measured step, or run)
    run = f.get("relative_to") == "run"
    # A conditional finding is headed by its fix applied on its own, the figure it is ranked by
    # (as on the console); what it gives once its primary is fixed is said under its fix.
    alone = f.get("alone")
    head = alone or f
    saved = f["saved_ms_per_step"]
    if alone and step_ms and alone.get("predicted_step_ms") is not None:
        saved = step_ms - alone["predicted_step_ms"]
    return {
        **f,
        "speedup_text": "no estimate" if f.get("estimate_withheld") else (
            fmt_x(head["estimated_speedup"]) + (" run" if run else "") + (" alone" if alone else "")),
        "range_text": f"{fmt_x(head['speedup_low'])} – {fmt_x(head['speedup_high'])}",
        "conditional_text": (f"{fmt_x(f['estimated_speedup'])} ({fmt_x(f['speedup_low'])} – "
                             f"{fmt_x(f['speedup_high'])})") if alone else None,
        "saved_text": fmt_ms(saved),
        "saved_share": (saved / step_ms) if step_ms and saved else 0.0,
        "predicted_text": fmt_ms(f["predicted_step_ms"]),
        "steps_text": step_ranges(ev["steps"]),
        "quantities": [quantity(k, v) for k, v in ev["quantities"].items()],
        "timeline_ids": shown,
        "slug": re.sub(r"[^a-z0-9-]", "", f["rule"].lower()) or "finding",
    }


def legend(timeline: dict[str, Any] | None) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Legend sections: (title, [(class key, label, time in the drawn step)])."""
    if not timeline:
        return []
    used = set(timeline["classes"])
    ns = timeline["class_ns"]
    kernels = [(f"k-{k}", k, fmt_ns(ns.get(f"k-{k}", 0))) for k in palette.KERNEL_COLORS
               if f"k-{k}" in used]
    kernels.sort(key=lambda x: -ns.get(x[0], 0))
    idle = [(f"idle-{k}", label, fmt_ns(ns.get(f"idle-{k}", 0)))
            for k, (_, label) in palette.IDLE_COLORS.items() if f"idle-{k}" in used]
    idle.sort(key=lambda x: -ns.get(x[0], 0))
    api = [(f"api-{k}", label, "") for k, (_, label) in palette.API_COLORS.items() if f"api-{k}" in used]
    order = list(palette.PHASE_COLORS)
    phases = sorted(((c, c.removeprefix("ph-"), "") for c in used if c.startswith("ph-")),
                    key=lambda x: order.index(x[1]) if x[1] in order else len(order))
    out = [("GPU kernels", kernels), ("GPU idle, because the host was in", idle),
           ("CUDA API", api), ("Phases", phases)]
    return [(title, items) for title, items in out if items]
