"""What the session records about the host and the script for the analysis (`advisor.engine.host`):
the cores this process may use, the framework packages it imported, who runs the loop, and the
settings of the DataLoader the loop draws from."""

from __future__ import annotations

import os
import sys
from typing import Any

from advisor.capture.capture_state import CaptureState

FRAMEWORK_MODULES = ("lightning", "lightning.pytorch", "pytorch_lightning", "transformers",
                     "transformers.trainer", "accelerate", "deepspeed", "timm")
"""Packages whose presence `advisor.engine.framework` reads (not the whole ``sys.modules``)."""


def loader_config(it: Any) -> dict[str, Any]:
    """A DataLoader iterator's settings, from its private attributes (stable since 1.7)."""
    return {"num_workers": int(getattr(it, "_num_workers", 0) or 0),
            "pin_memory": bool(getattr(it, "_pin_memory", False)),
            "persistent_workers": bool(getattr(it, "_persistent_workers", False)),
            "prefetch_factor": getattr(it, "_prefetch_factor", None),
            "batch_size": getattr(getattr(it, "_index_sampler", None), "batch_size", None)}


def stack_packages(depth: int = 60) -> list[str]:
    """Top-level package names on the calling stack, innermost first, each once."""
    out: list[str] = []
    frame = sys._getframe(1)
    while frame is not None and depth:
        mod = frame.f_globals.get("__name__", "")
        parts = mod.split(".")
        for name in (".".join(parts[:2]), parts[0]):
            if name and name not in out and parts[0] not in ("advisor", "click", "runpy"):
                out.append(name)
        frame, depth = frame.f_back, depth - 1
    return out


def record_host(state: CaptureState) -> None:
    """The host's cores and the framework packages the script imported, into ``state``."""
    try:
        state.host_cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        state.host_cores = os.cpu_count()
    state.framework_modules = [m for m in FRAMEWORK_MODULES if m in sys.modules]
