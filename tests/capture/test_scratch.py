"""A trial's saves stay in its scratch folder, and a saver that renames what it saved still works.

timm's ``CheckpointSaver`` (``train.py``'s checkpoints) writes ``tmp.pth.tar`` with `torch.save`
and then, in the same folder, checks ``os.path.exists(last)``, ``os.unlink``s it, ``os.replace``s
the temporary file onto it and ``os.link``s or ``shutil.copy2``s it to ``model_best``. Under
`advisor profile --try` on the H100 both of timm's trials failed with ``FileNotFoundError`` at
the rename (the saved file was in scratch, the rename looked in the real folder), and the unlink
could have removed the user's real ``last.pth.tar``. Real torch, real files, in process."""

from __future__ import annotations

import os
import shutil

import pytest

torch = pytest.importorskip("torch", reason="the scratch folder redirects torch.save")

from advisor.capture.scratch import Scratch  # noqa: E402


def _timm_like_save(folder: str, value: float) -> None:
    tmp, last, best = (os.path.join(folder, n) for n in ("tmp.pth.tar", "last.pth.tar",
                                                         "model_best.pth.tar"))
    torch.save({"w": torch.tensor([value])}, tmp)
    if os.path.exists(last):
        os.unlink(last)
    os.replace(tmp, last)
    if os.path.exists(best):
        os.unlink(best)
    os.link(last, best)
    shutil.copy2(last, os.path.join(folder, "checkpoint-0.pth.tar"))


def test_a_save_then_rename_checkpoint_stays_in_scratch_and_leaves_the_real_one(tmp_path,
                                                                                monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "out"
    real.mkdir()
    torch.save({"w": torch.tensor([1.0])}, real / "last.pth.tar")  # the user's own checkpoint
    before = (real / "last.pth.tar").read_bytes()
    scratch = Scratch(tmp_path / "scratch")
    scratch.install()
    try:
        _timm_like_save("out", 2.0)
        _timm_like_save("out", 3.0)  # the second epoch: last/best exist (in scratch) and go
        assert torch.load("out/last.pth.tar")["w"].item() == 3.0  # read back from scratch
        other = tmp_path / "data.txt"
        other.write_text("x")
        assert os.path.exists(other)  # a folder the trial saved nothing into is left alone
    finally:
        scratch.uninstall()
    assert (real / "last.pth.tar").read_bytes() == before
    assert sorted(p.name for p in real.iterdir()) == ["last.pth.tar"]
    kept = tmp_path / "scratch" / "out"
    assert sorted(p.name for p in kept.iterdir()) == [
        "checkpoint-0.pth.tar", "last.pth.tar", "model_best.pth.tar"]
    assert torch.load(kept / "model_best.pth.tar")["w"].item() == 3.0
    assert os.replace is not None and os.path.exists.__name__ == "exists"  # all put back
    assert not hasattr(os.replace, "__wrapped__") and not hasattr(shutil.copy2, "__wrapped__")


def test_a_save_into_a_folder_already_in_scratch_stays_there(tmp_path, monkeypatch):
    """A framework's output folder points into scratch already (HF ``output_dir``, Lightning's
    ``default_root_dir``); its own saves there must not be redirected a second time (they were
    written under ``scratch/<the scratch path again>/``, apart from the rest of the checkpoint)."""
    monkeypatch.chdir(tmp_path)
    scratch = Scratch(tmp_path / "out" / "scratch")
    scratch.install()
    try:
        out = scratch.path("hf-out")  # what TrainingArguments(output_dir="hf-out") gets
        torch.save({"w": torch.tensor([1.0])}, os.path.join(out, "checkpoint-2", "optimizer.pt"))
        assert scratch.path(os.path.join(out, "last.ckpt")) == os.path.join(out, "last.ckpt")
    finally:
        scratch.uninstall()
    assert (tmp_path / "out" / "scratch" / "hf-out" / "checkpoint-2" / "optimizer.pt").is_file()
    assert sorted(p.name for p in (tmp_path / "out" / "scratch").iterdir()) == ["hf-out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_framework_output_folder_leaves_the_working_directory_and_rmtree_alone(tmp_path,
                                                                                 monkeypatch):
    """A relative output folder (HF ``output_dir="hf-out"``) is in the working directory: the
    folder, not its parent, is one the trial saved into, so the script's other relative paths
    still resolve (``os.path.exists("data.txt")`` was False in HF trials); and ``shutil.rmtree``
    (HF's ``save_total_limit`` rotation) unlinks by names relative to an open folder, which must
    not be mapped as if relative to the working directory (once that is a folder saved into,
    they became scratch paths, missed, and rotation silently kept every checkpoint)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("x")
    scratch = Scratch(tmp_path / "scratch")
    scratch.install()
    try:
        out = scratch.path("hf-out", folder=True)
        os.makedirs(os.path.join(out, "checkpoint-2"))
        torch.save({"w": torch.tensor([1.0])}, os.path.join(out, "checkpoint-2", "optimizer.pt"))
        assert os.path.exists("data.txt")
        assert os.path.exists("hf-out/checkpoint-2")  # what is in the folder follows it
        torch.save({}, "ckpt.pt")  # the working directory is now a folder saved into
        assert os.path.exists("ckpt.pt") and not (tmp_path / "ckpt.pt").exists()
        shutil.rmtree(os.path.join(out, "checkpoint-2"), ignore_errors=True)
        assert not os.path.exists(os.path.join(out, "checkpoint-2"))
    finally:
        scratch.uninstall()
    assert (tmp_path / "data.txt").read_text() == "x"
