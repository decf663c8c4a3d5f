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
    """``torch.cuda.nvtx``: the default domain, names only.

    Called through torch's C functions themselves (``torch._C._nvtx.rangeStartA``/``rangeEnd``,
    what ``torch.cuda.nvtx.range_start``/``range_end`` wrap): `Marker` calls ``start_name`` and
    ``end_token`` directly, one C call per mark and no Python frame of ours or torch's."""

    name = "torch.cuda.nvtx"

    def __init__(self) -> None:
        from torch._C import _nvtx

        self.start_name = _nvtx.rangeStartA
        self.end_token = _nvtx.rangeEnd

    def start(self, name: str, category: str) -> Any:
        return self.start_name(name)

    def end(self, token: Any) -> None:
        if token is not None:
            self.end_token(token)


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
    """Opens and closes one named range on NVTX and, when asked, on torch.profiler.

    Outside the recorded window this runs a few times per step on the loop thread of a job
    whose host time may be its step time (issue 32), so the common cases are short: with no
    NVTX emitter (a CPU build, or the ``nvtx`` package with no tool attached) and no profiler,
    `open` makes nothing and returns None, which `close` and the session skip; with torch's
    NVTX it is one C call each way (`_TorchNvtx`)."""

    def __init__(self, nvtx: _NoNvtx | _NvtxPackage | _TorchNvtx) -> None:
        import torch.autograd.profiler as autograd_profiler

        self.nvtx = nvtx
        self._record_function = autograd_profiler.record_function
        # whether an NVTX range can be emitted at all (`_NvtxPackage` decides once, at start)
        self.live = not isinstance(nvtx, _NoNvtx) and getattr(nvtx, "_enabled", True)
        self._start_name = getattr(nvtx, "start_name", None)  # a C function of the name alone
        self._end_token = getattr(nvtx, "end_token", None)

    def open(self, name: str, category: str, profiler: bool) -> tuple[Any, Any] | None:
        """The mark to pass to `close`; None when nothing was opened."""
        if self.live:
            start = self._start_name
            token = start(name) if start is not None else self.nvtx.start(name, category)
        elif not profiler:
            return None
        else:
            token = None
        rf = None
        if profiler:
            rf = self._record_function(name)
            rf.__enter__()
        return token, rf

    def close(self, mark: tuple[Any, Any] | None, *, nvtx: bool = True) -> None:
        if mark is None:
            return
        token, rf = mark
        if rf is not None:
            rf.__exit__(None, None, None)
        if nvtx and token is not None:
            end = self._end_token
            if end is not None:
                end(token)
            else:
                self.nvtx.end(token)
