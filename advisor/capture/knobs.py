"""Apply knobs (`advisor.engine.knobs`) from advisor's hooks in a trial run of the script.

Everything here runs in the trial's own process (`advisor.capture.trial_child`), before and
while the unmodified script runs, and changes only what the knob names:

* ``loader``: `torch.utils.data.DataLoader.__init__` gets the settings as overrides (every
  DataLoader the script builds, the frameworks' included);
* ``compile``: the top-level module(s) the session finds are compiled in place
  (``module.compile``, so the script's references stay valid); a script that compiles by itself
  gets the knob's mode through `torch.compile`;
* ``bf16``: ``torch.autocast(dtype=bfloat16)`` around the top-level module(s)' ``forward``
  (the loss computed outside it gets their bf16 output, as with autocast around the model);
* ``tf32``: the matmul and cuDNN TF32 flags, set before the script runs;
* ``ddp``: `DistributedDataParallel.__init__` gets the settings as overrides.

Hugging Face `TrainingArguments` and Lightning `Trainer` get the knobs in their own terms when
the script imports them (`FrameworkPatches`): the framework then does what its users would
configure, and the generic hook for the same kind stands down.

`applied` says what each knob reached (``DataLoader(num_workers=4)``, ``compiled GPT``): a knob
that reached nothing is a failed trial, not a 1.00x measurement.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from advisor.capture.frameworks import FrameworkPatches, override_init
from advisor.engine.knobs import Knob


class KnobApplier:
    """The knobs of one trial, installed before the script runs; `top_modules` is called by the
    trial's session once it knows which modules the loop calls at the top."""

    def __init__(self, knobs: Iterable[Knob],
                 output_dir: Callable[[str | None], str] | None = None,
                 save_path: Callable[[str], str] | None = None) -> None:
        self.knobs = {k.kind: k for k in knobs}
        self.applied: list[str] = []  # what each knob reached, in words
        self.passed_over: list[str] = []  # where a knob had nothing to change, and why
        self._undo: list[Callable[[], None]] = []
        self.frameworks = FrameworkPatches(self.knobs, self.applied, output_dir, save_path)

    def note(self, what: str) -> None:
        if what not in self.applied:
            self.applied.append(what)

    def install(self) -> None:
        import torch

        if "tf32" in self.knobs:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            self.note("TF32 on (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32)")
        if "loader" in self.knobs:
            from torch.utils.data import DataLoader

            override_init(DataLoader, self._loader_settings, self._undo)
        if "ddp" in self.knobs:
            from torch.nn.parallel import DistributedDataParallel

            settings = dict(self.knobs["ddp"].settings)

            def ddp(named: dict[str, Any]) -> dict[str, Any]:
                self.note("DistributedDataParallel(" + _kw(settings) + ")")
                return settings

            override_init(DistributedDataParallel, ddp, self._undo)
        if "compile" in self.knobs and self.knobs["compile"].settings:
            self._compile_calls(torch)
        self.frameworks.install()

    def _loader_settings(self, named: dict[str, Any]) -> dict[str, Any]:
        s = dict(self.knobs["loader"].settings)
        workers = s.get("num_workers", named.get("num_workers", 0)) or 0
        if workers <= 0:  # these need worker processes; DataLoader refuses them without
            for key in ("persistent_workers", "prefetch_factor"):
                s.pop(key, None)
        if s:
            self.note("DataLoader(" + _kw(s) + ")")
        return s

    def _compile_calls(self, torch: Any) -> None:
        """The script's own torch.compile calls get the knob's settings (mode, backend)."""
        orig = torch.compile
        settings = self._compile_kwargs()

        def compile(*args, **kwargs):
            kwargs.update(settings)
            if args and callable(args[0]):
                self.note(f"the script's torch.compile({_name(args[0])}) with " + _kw(settings))
            return orig(*args, **kwargs)

        compile.__wrapped__ = orig  # type: ignore[attr-defined]
        torch.compile = compile
        self._undo.append(lambda: setattr(torch, "compile", orig))

    def _compile_kwargs(self) -> dict[str, Any]:
        s = dict(self.knobs["compile"].settings)
        if s.get("mode") == "default":
            s["mode"] = None
        return s

    def top_modules(self, modules: list[Any]) -> None:
        """Compile and/or autocast the top-level modules (unless a framework took the knob)."""
        for module in modules:
            if "bf16" in self.knobs and "bf16" not in self.frameworks.took:
                self._bf16(module)
            if "compile" in self.knobs and "compile" not in self.frameworks.took:
                self._compile(module)

    def _compile(self, module: Any) -> None:
        from torch._dynamo.eval_frame import OptimizedModule

        if isinstance(module, OptimizedModule) or getattr(module, "_compiled_call_impl", None):
            self.passed_over.append(f"{type(module).__name__} is compiled by the script already")
            return
        kwargs = self._compile_kwargs()
        module.compile(**kwargs)
        self.note(f"torch.compile({type(module).__name__}"
                  + (", " + _kw({k: v for k, v in kwargs.items() if v is not None})
                     if any(v is not None for v in kwargs.values()) else "") + ")")

    def _bf16(self, module: Any) -> None:
        """Autocast inside the module's own ``forward`` (an instance attribute wrapping it), not
        in hooks: a compiled module traces its hooks, and Dynamo handles an autocast block in
        forward but not one entered in a pre-hook and left in a hook."""
        import functools

        import torch

        device = _device_of(module)
        inner = module.forward

        @functools.wraps(inner)
        def forward(*args, **kwargs):
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                return inner(*args, **kwargs)

        module.forward = forward
        self.note(f"bf16 autocast ({device}) around {type(module).__name__}.forward")

    def uninstall(self) -> None:
        self.frameworks.uninstall()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def _device_of(module: Any) -> str:
    import torch

    for p in module.parameters():
        return p.device.type
    return "cuda" if torch.cuda.is_available() else "cpu"


def _name(obj: Any) -> str:
    return type(obj).__name__ if not inspect.isfunction(obj) else obj.__name__


def _kw(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items())
