"""One colour per thing the HTML report draws, so the timeline, legends and tables agree.

Every colour is keyed by a short CSS-safe class name (``k-gemm``, ``idle-sync``, ``api-launch``);
the template turns `css_rules` into ``.c-<key>`` fill/background rules and the timeline's script
only ever sets class names, never colours. Classification of idle causes and API calls is by
name, the same names `advisor.graph.step_breakdown` blames idle time on.
"""

from __future__ import annotations

import zlib

from advisor.graph.kernels import KernelCategory

KERNEL_COLORS: dict[str, str] = {
    KernelCategory.GEMM.value: "#2456a6",
    KernelCategory.CONV.value: "#1a8ab5",
    KernelCategory.ATTENTION.value: "#8a5cc2",
    KernelCategory.COMMUNICATION.value: "#a0522d",
    KernelCategory.NORM.value: "#b5b82a",
    KernelCategory.SOFTMAX.value: "#d874b8",
    KernelCategory.RNG.value: "#e8837c",
    KernelCategory.REDUCTION.value: "#d9a61c",
    KernelCategory.ELEMENTWISE.value: "#3f9a4a",
    KernelCategory.OPTIMIZER.value: "#8cc97d",
    KernelCategory.COPY.value: "#ee7d22",
    KernelCategory.MEMSET.value: "#f4b87a",
    KernelCategory.GRAPH.value: "#6f8fb8",
    KernelCategory.OTHER.value: "#8e8e8e",
}

IDLE_COLORS: dict[str, tuple[str, str]] = {
    # key: (colour, legend label)
    "sync": ("#d83a34", "host synchronize"),
    "copy": ("#ef8a3a", "blocking copy"),
    "alloc": ("#8c5a3c", "allocator"),
    "launch": ("#f0c23b", "launch latency"),
    "api": ("#c59bd6", "other CUDA call"),
    "host": ("#8b8fb3", "host code (named range)"),
    "untraced": ("#c9c9c9", "host (untraced)"),
}

API_COLORS: dict[str, tuple[str, str]] = {
    "launch": ("#9bb3d1", "launch"),
    "sync": ("#d83a34", "synchronize"),
    "copy": ("#ef8a3a", "memcpy/memset"),
    "alloc": ("#8c5a3c", "malloc/free"),
    "other": ("#b4b4b4", "other"),
}

PHASE_COLORS: dict[str, str] = {
    "data": "#5fb3b3",
    "forward": "#4f83c2",
    "loss": "#9a78c9",
    "backward": "#e58f3c",
    "optimizer": "#5aa55f",
}
OTHER_PHASE = "#9a9a9a"

RANGE_COLORS = (
    "#c9dcef", "#cfe8c6", "#f8d8b0", "#dcd8ec", "#f6c6b8",
    "#dcebb0", "#f3d4e6", "#d2e6ea", "#eee2c0", "#d8d8d8",
)
"""Pastels for CPU ranges, picked by name so one operator keeps one colour (Perfetto's idea)."""

STEP_COLORS = {"step-cpu": "#5b6573", "step-gpu": "#2b3440"}


def idle_class(cause: str) -> str:
    """The colour class of an idle cause string from `advisor.graph.step_breakdown`."""
    low = cause.lower()
    if cause == "launch latency":
        return "launch"
    if cause == "host (untraced)":
        return "untraced"
    if "synchron" in low or "streamwait" in low or "eventquery" in low or "streamquery" in low:
        return "sync"
    if low.startswith(("cudamemcpy", "cudamemset", "cumemcpy", "cumemset")):
        return "copy"
    if any(x in low for x in ("malloc", "free", "hostalloc", "hostregister", "memalloc", "mempool")):
        return "alloc"
    if low.startswith(("cuda", "cu")) and " " not in cause:
        return "api"
    return "host"


def api_class(name: str) -> str:
    """The colour class of a CUDA runtime/driver call by its name."""
    low = name.lower()
    if "launch" in low:
        return "launch"
    klass = idle_class(name)
    if klass in ("sync", "copy", "alloc"):
        return klass
    return "other"


def range_class(name: str) -> str:
    return f"r{zlib.crc32(name.encode('utf-8', 'replace')) % len(RANGE_COLORS)}"


def phase_class(name: str) -> str:
    return f"ph-{name}" if name in PHASE_COLORS else "ph-other"


def _is_light(hex_color: str) -> bool:
    r, g, b = (int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.6


def all_colors() -> dict[str, str]:
    """Every class key -> colour."""
    out: dict[str, str] = {f"k-{k}": v for k, v in KERNEL_COLORS.items()}
    out.update({f"idle-{k}": v[0] for k, v in IDLE_COLORS.items()})
    out.update({f"api-{k}": v[0] for k, v in API_COLORS.items()})
    out.update({f"ph-{k}": v for k, v in PHASE_COLORS.items()})
    out["ph-other"] = OTHER_PHASE
    out.update({f"r{i}": c for i, c in enumerate(RANGE_COLORS)})
    out.update(STEP_COLORS)
    return out


def css_rules() -> str:
    """CSS for every class: ``.c-KEY`` fills SVG shapes and backgrounds HTML swatches;
    ``.t-KEY`` is the label colour that stays readable on that fill."""
    lines = []
    for key, color in all_colors().items():
        text = "#1d232b" if _is_light(color) else "#ffffff"
        lines.append(f".c-{key}{{fill:{color};background:{color}}}.t-{key}{{fill:{text}}}")
    return "\n".join(lines)
