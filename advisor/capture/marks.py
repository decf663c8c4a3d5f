"""Range marks: NVTX (for Nsight Systems) and, inside the recorded window, record_function.

NVTX goes through the ``nvtx`` package when it is installed (domain ``advisor``, categories
``step`` and ``phase``), else through ``torch.cuda.nvtx`` (default domain), else nowhere (a CPU
build of torch has no NVTX). Ranges are start/end ranges, not push/pop: they never pair with a
push/pop of the script's own, and a step that never ends (the script raised inside it) is left
open instead of being recorded as complete.

Without a tool attached, an NVTX call returns at once; record_function is only used while a
torch.profiler window records, because it costs a dispatcher call even when nothing listens.
"""

from __future__ import annotations

from typing import Any

DOMAIN = "advisor"
STEP_COLOR = 0x76B900  # NVIDIA green: steps stand out from the phases inside them
PHASE_COLORS = {
    "data": 0x4E79A7,
    "forward": 0xF28E2B,
    "loss": 0xE15759,
    "backward": 0x76B7B2,
    "optimizer": 0x59A14F,
}


class _NoNvtx:
    name = "none"

    def start(self, name: str, category: str) -> Any:
        return None

    def end(self, token: Any) -> None:
        return None


class _NvtxPackage:
    """The ``nvtx`` package: a domain, categories, colours; attributes made once per name."""

    name = "nvtx"

    def __init__(self) -> None:
        import nvtx

        self._domain = nvtx.get_domain(DOMAIN)
        self._enabled = hasattr(self._domain, "handle")  # DummyDomain when no tool is attached
        self._attrs: dict[tuple[str, str], Any] = {}
        self._categories: dict[str, Any] = {}

    def _attributes(self, name: str, category: str) -> Any:
        key = (name, category)
        attrs = self._attrs.get(key)
        if attrs is None:
            color = STEP_COLOR if category == "step" else PHASE_COLORS.get(name, 0x9C755F)
            attrs = self._domain.get_event_attributes(message=name, color=color, category=category)
            if category != "step":  # one string per step number would grow without bound
                self._attrs[key] = attrs
        return attrs

    def start(self, name: str, category: str) -> Any:
        if not self._enabled:
            return None
        return self._domain.start_range(self._attributes(name, category))

    def end(self, token: Any) -> None:
        if token is not None:
            self._domain.end_range(token)


class _TorchNvtx:
    """``torch.cuda.nvtx``: the default domain, names only."""

    name = "torch.cuda.nvtx"

    def __init__(self) -> None:
        import torch.cuda.nvtx as tnvtx

        self._start = tnvtx.range_start
        self._end = tnvtx.range_end

    def start(self, name: str, category: str) -> Any:
        return self._start(name)

    def end(self, token: Any) -> None:
        if token is not None:
            self._end(token)


def nvtx_backend(prefer: str = "auto") -> _NoNvtx | _NvtxPackage | _TorchNvtx:
    """The best NVTX emitter available: the nvtx package, torch.cuda.nvtx, or none."""
    if prefer in ("auto", "nvtx"):
        try:
            return _NvtxPackage()
        except Exception:  # not installed, or its library failed to load
            if prefer == "nvtx":
                raise
    if prefer in ("auto", "torch"):
        import torch

        if hasattr(torch._C, "_nvtx"):  # absent from CPU builds
            try:
                return _TorchNvtx()
            except Exception:
                if prefer == "torch":
                    raise
    return _NoNvtx()


class Marker:
    """Opens and closes one named range on NVTX and, when asked, on torch.profiler."""

    def __init__(self, nvtx: _NoNvtx | _NvtxPackage | _TorchNvtx) -> None:
        import torch.autograd.profiler as autograd_profiler

        self.nvtx = nvtx
        self._record_function = autograd_profiler.record_function

    def open(self, name: str, category: str, profiler: bool) -> tuple[Any, Any]:
        token = self.nvtx.start(name, category)
        rf = None
        if profiler:
            rf = self._record_function(name)
            rf.__enter__()
        return token, rf

    def close(self, mark: tuple[Any, Any], *, nvtx: bool = True) -> None:
        token, rf = mark
        if rf is not None:
            rf.__exit__(None, None, None)
        if nvtx:
            self.nvtx.end(token)
