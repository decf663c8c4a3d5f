"""A trial's scratch folder: what the script saves during a trial lands there, not on its files.

A trial (`advisor profile --try`) runs the user's script again, several times, stopped at a step
boundary; a checkpoint it writes on the way (or on the interrupt, in its clean-up) must not
replace the user's real one. During a trial:

* `torch.save` to a path (a ``str`` or ``os.PathLike``) writes under the scratch folder instead,
  at the same path relative to the working directory (an absolute path outside it keeps its
  whole path below ``abs/``); `torch.load` of a path this trial saved reads it back from there;
* ``safetensors.torch.save_file``/``save_model`` are redirected the same way once the script
  imports safetensors;
* in a folder the trial has saved into, what the script then does to files follows the save
  there: ``os.replace``/``rename``/``link``/``remove``/``unlink``, ``os.path.exists``,
  ``shutil.copy``/``copy2``/``copyfile``/``move``. A checkpoint saver that writes ``tmp.pth``
  and renames it to ``last.pth`` (timm's ``CheckpointSaver``, after ``os.path.exists(dst)`` and
  ``os.unlink(dst)``) failed the trial on the H100 (the renamed file was not where it looked),
  and could have removed the user's real ``last.pth``;
* Hugging Face `TrainingArguments(output_dir=...)` and Lightning `Trainer(default_root_dir=...)`
  and `Trainer.save_checkpoint` point into it (`advisor.capture.frameworks`).

Not redirected (docs/profile.md says so): files the script opens itself (``open()``, numpy,
pickle, CSV logs), a `torch.save` into an already open file object, and experiment trackers
(the trial sets ``WANDB_MODE=disabled``; TensorBoard logs follow ``output_dir`` in HF).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Scratch:
    """Redirects the script's saves into ``root`` while installed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.moved: dict[str, str] = {}  # the script's path (resolved) -> where it went
        self.folders: set[str] = set()  # the script's folders (resolved) the trial saved into
        self._undo: list[Callable[[], None]] = []
        self._cwd = Path.cwd()
        self._root = Path(os.path.normpath(self._cwd / root))  # absolute, as paths are compared

    def path(self, original: str | os.PathLike[str] | None, default: str = "output",
             folder: bool = False) -> str:
        """Where ``original`` goes during the trial (a folder for None). A file's folder joins
        the folders the trial saved into; a ``folder`` (a framework's output folder) joins them
        itself, not its parent: a relative ``output_dir``'s parent is the working directory,
        and every relative path there (``os.path.exists("data.txt")``) would have followed."""
        if original is None:
            target = self.root / default
        else:
            p = Path(os.fspath(original))
            full = p if p.is_absolute() else self._cwd / p
            full = Path(os.path.normpath(full))
            if full.is_relative_to(self._root):
                # already here: a save into a framework's output folder, which the trial pointed
                # into scratch (HF `output_dir`, Lightning's `default_root_dir`), stays where it is
                # instead of nesting a second copy of the scratch path under the scratch folder
                full.parent.mkdir(parents=True, exist_ok=True)
                return str(full)
            try:
                rel = full.relative_to(self._cwd)
            except ValueError:
                rel = Path("abs", *full.parts[1:])
            target = self.root / rel
            self.moved[str(full)] = str(target)
            self.folders.add(str(full if folder else full.parent))
        target.parent.mkdir(parents=True, exist_ok=True)
        return str(target)

    def _loaded_from(self, original: Any) -> Any:
        if isinstance(original, (str, os.PathLike)):
            p = Path(os.fspath(original))
            full = str(Path(os.path.normpath(p if p.is_absolute() else self._cwd / p)))
            return self.moved.get(full, original)
        return original

    def _in_folder(self, original: Any) -> Any:
        """A path in a folder the trial saved into goes where the trial's saves went there;
        any other path (or an open file) is left alone."""
        if isinstance(original, (str, os.PathLike)) and self.folders:
            p = Path(os.fspath(original))
            full = Path(os.path.normpath(p if p.is_absolute() else self._cwd / p))
            if str(full.parent) in self.folders:
                return self.path(full)
        return original

    def install(self) -> None:
        import shutil

        import torch

        self._wrap(torch, "save", 1, self.path)
        self._wrap(torch, "load", 0, self._loaded_from)
        for owner, names in ((os, ("replace", "rename", "link", "remove", "unlink")),
                             (os.path, ("exists",)),
                             (shutil, ("copy", "copy2", "copyfile", "move"))):
            for name in names:
                self._wrap(owner, name, 0, self._in_folder)
                if name in ("replace", "rename", "link", "copy", "copy2", "copyfile", "move"):
                    self._wrap(owner, name, 1, self._in_folder)
        if "safetensors.torch" in sys.modules:
            self.safetensors(sys.modules["safetensors.torch"])
        else:  # patched once the script imports it
            from advisor.capture.frameworks import _PatchOnImport

            finder = _PatchOnImport(("safetensors.torch",), self.safetensors)
            sys.meta_path.insert(0, finder)
            self._undo.append(lambda: finder in sys.meta_path and sys.meta_path.remove(finder))

    def safetensors(self, module: Any) -> None:
        """Redirect safetensors' file saves (called once the script has imported it)."""
        for name in ("save_file", "save_model"):
            if hasattr(module, name):
                self._wrap(module, name, 1, self.path)

    def _wrap(self, owner: Any, attr: str, position: int,
              where: Callable[[Any], Any]) -> None:
        """Map the path argument at ``position`` (or named f/filename) through ``where``."""
        orig = getattr(owner, attr)

        def redirected(*args, **kwargs):
            if any(kwargs.get(k) is not None for k in ("dir_fd", "src_dir_fd", "dst_dir_fd")):
                # a name relative to an open folder (shutil.rmtree's unlinks), not to the
                # working directory: mapped, it became an absolute path that missed the file
                return orig(*args, **kwargs)
            args = list(args)
            for key in ("f", "filename"):
                if key in kwargs and isinstance(kwargs[key], (str, os.PathLike)):
                    kwargs[key] = where(kwargs[key])
            if len(args) > position and isinstance(args[position], (str, os.PathLike)):
                args[position] = where(args[position])
            return orig(*args, **kwargs)

        redirected.__wrapped__ = orig  # type: ignore[attr-defined]
        redirected.__doc__ = orig.__doc__
        setattr(owner, attr, redirected)
        self._undo.append(lambda: setattr(owner, attr, orig))

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
