"""Knobs in a framework's own terms: Hugging Face `TrainingArguments`, Lightning `Trainer`.

A script that trains through a framework configures precision, compilation and loading there;
turning the same knob underneath it (autocast around the model) would fight the framework's
own handling (its GradScaler, its loader settings). So when the script imports the framework,
its constructor gets the knob as the argument a user would pass (``bf16=True``,
``precision="bf16-mixed"``), and the generic hook of that kind stands down (`took`).

The constructors are patched when their module is first imported (a `sys.meta_path` finder
that wraps the module's loader), or at once when it already is. Trials also redirect the
frameworks' outputs (`output_dir`, `default_root_dir`) into the trial's scratch folder
(`advisor.capture.scratch`), through the same patches.
"""

from __future__ import annotations

import importlib.abc
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

from advisor.engine.knobs import Knob


def override_init(owner: type, overrides: Callable[[dict[str, Any]], dict[str, Any]],
                  undo: list[Callable[[], None]]) -> None:
    """Wrap ``owner.__init__`` so its bound arguments pass through ``overrides`` first (how a
    knob reaches a constructor: a framework's here, the DataLoader's and DDP's in
    `advisor.capture.knobs`)."""
    orig = owner.__init__
    sig = inspect.signature(orig)

    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:  # let the original raise its own error
            return orig(self, *args, **kwargs)
        for key, value in (overrides(dict(bound.arguments)) or {}).items():
            if key in sig.parameters:  # a setting this version does not take is left out
                bound.arguments[key] = value
        return orig(*bound.args, **bound.kwargs)

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    owner.__init__ = __init__  # type: ignore[method-assign]
    undo.append(lambda: setattr(owner, "__init__", orig))


HF_MODULE = "transformers.training_args"
LIGHTNING_MODULES = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")


def hf_overrides(knobs: Mapping[str, Knob], fields: Any, cuda: bool) -> dict[str, Any]:
    """`TrainingArguments` keyword arguments for the knobs (only fields this version has)."""
    out: dict[str, Any] = {}
    if "bf16" in knobs:
        out.update(bf16=True, fp16=False)
    if "tf32" in knobs and cuda:  # TrainingArguments refuses tf32=True without an Ampere GPU
        out["tf32"] = True
    if "compile" in knobs:
        out["torch_compile"] = True
        mode = knobs["compile"].settings.get("mode")
        if mode and mode != "default":
            out["torch_compile_mode"] = mode
        if knobs["compile"].settings.get("backend"):
            out["torch_compile_backend"] = knobs["compile"].settings["backend"]
    if "loader" in knobs:
        s = knobs["loader"].settings
        names = {"num_workers": "dataloader_num_workers", "pin_memory": "dataloader_pin_memory",
                 "persistent_workers": "dataloader_persistent_workers",
                 "prefetch_factor": "dataloader_prefetch_factor"}
        out.update({names[k]: v for k, v in s.items()})
    return {k: v for k, v in out.items() if k in fields}


def lightning_overrides(knobs: Mapping[str, Knob]) -> dict[str, Any]:
    """`Trainer` keyword arguments for the knobs (precision only: the rest is generic)."""
    return {"precision": "bf16-mixed"} if "bf16" in knobs else {}


def _note(applied: list[str], what: str) -> None:
    if what not in applied:
        applied.append(what)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs ``patch(module)`` right after one of ``names`` is imported."""

    def __init__(self, names: tuple[str, ...], patch: Callable[[Any], None]) -> None:
        self.names, self.patch = names, patch

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        spec = None
        for finder in sys.meta_path:  # whoever would have found it (editable installs too)
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, _PatchOnImport) or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader, patch = spec.loader, self.patch
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class FrameworkPatches:
    """The framework constructors' patches for one trial."""

    def __init__(self, knobs: Mapping[str, Knob], applied: list[str],
                 output_dir: Callable[[str | None], str] | None = None,
                 save_path: Callable[[str], str] | None = None) -> None:
        self.knobs = knobs
        self.applied = applied
        self.output_dir = output_dir  # the trial's scratch folder for the framework's outputs
        self.save_path = save_path or output_dir  # where a file the framework saves goes
        self.took: set[str] = set()  # knob kinds a framework applied
        self._undo: list[Callable[[], None]] = []
        self._finders: list[_PatchOnImport] = []

    def install(self) -> None:
        self._watch((HF_MODULE,), self._patch_hf)
        self._watch(LIGHTNING_MODULES, self._patch_lightning)

    def _watch(self, names: tuple[str, ...], patch: Callable[[Any], None]) -> None:
        for name in names:
            if name in sys.modules:
                patch(sys.modules[name])
        finder = _PatchOnImport(names, patch)
        sys.meta_path.insert(0, finder)
        self._finders.append(finder)

    def _patch_hf(self, module: Any) -> None:
        cls = getattr(module, "TrainingArguments", None)
        if cls is None:
            return
        import dataclasses

        import torch

        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        wanted = hf_overrides(self.knobs, fields, torch.cuda.is_available())

        def overrides(named: dict[str, Any]) -> dict[str, Any]:
            out = dict(wanted)
            if self.output_dir is not None and "output_dir" in fields:
                out["output_dir"] = self.output_dir(named.get("output_dir"))
            if wanted:
                _note(self.applied, "TrainingArguments(" + ", ".join(
                    f"{k}={v!r}" for k, v in wanted.items()) + ")")
                self.took.update(k for k in ("bf16", "compile") if k in self.knobs)
            return out

        override_init(cls, overrides, self._undo)

    def _patch_lightning(self, module: Any) -> None:
        cls = getattr(module, "Trainer", None)
        if cls is None:
            return
        wanted = lightning_overrides(self.knobs)

        def overrides(named: dict[str, Any]) -> dict[str, Any]:
            out = dict(wanted)
            if self.output_dir is not None:
                out["default_root_dir"] = self.output_dir(named.get("default_root_dir"))
            if wanted:
                _note(self.applied, "Trainer(" + ", ".join(
                    f"{k}={v!r}" for k, v in wanted.items()) + ")")
                self.took.update(k for k in ("bf16",) if k in self.knobs)
            return out

        override_init(cls, overrides, self._undo)
        if self.output_dir is not None and hasattr(cls, "save_checkpoint"):
            self._redirect_save_checkpoint(cls)

    def _redirect_save_checkpoint(self, cls: type) -> None:
        """``Trainer.save_checkpoint(filepath)`` (what ModelCheckpoint calls) into scratch."""
        orig = cls.save_checkpoint
        to = self.save_path

        def save_checkpoint(trainer, filepath, *args, **kwargs):
            return orig(trainer, to(str(filepath)), *args, **kwargs)

        cls.save_checkpoint = save_checkpoint  # type: ignore[attr-defined]
        self._undo.append(lambda: setattr(cls, "save_checkpoint", orig))

    def uninstall(self) -> None:
        for finder in self._finders:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        self._finders.clear()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
