"""`advisor profile --try` on real Hugging Face Trainer and Lightning scripts: each knob reaches
the framework object in the framework's own terms (`advisor.capture.frameworks`), the generic
hook of that kind stands down, and the frameworks' outputs go to the trial's scratch folder.

Real transformers and lightning (the ``test`` extra), real trial processes, as `advisor profile
--try` starts them (`advisor.capture.trial.Runner`); the scripts (`scripts/hf_knobs.py`,
`scripts/lightning_knobs.py`) report from inside what their `TrainingArguments`, `Trainer`,
DataLoader and forward saw. On the CPU:

* HF ``tf32``: `TrainingArguments` refuses ``tf32=True`` without an Ampere GPU, so the patch
  leaves it out there (`hf_overrides`) and only the generic flag is set; that the field is left
  alone is what is checked here (``tf32=True`` itself: tests/capture/test_try.py's
  `test_framework_arguments_for_the_knobs`, and the H100);
* HF ``torch_compile``: tried with ``compile:backend=eager`` (``torch_compile=True``,
  ``torch_compile_backend="eager"``), which compiles through Dynamo as the default does but
  skips Inductor's C++ code generation (tens of seconds on a 2-core machine, and a compiler).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.capture.test_try import observed, trial

SCRIPTS = Path(__file__).resolve().parent / "scripts"
HF = SCRIPTS / "hf_knobs.py"
LIGHTNING = SCRIPTS / "lightning_knobs.py"


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_hf_training_arguments_get_every_knob_and_checkpoints_stay_in_scratch(tmp_path):
    obs = tmp_path / "seen.jsonl"
    res = trial(tmp_path, HF, ["--observe", str(obs)],
                ["bf16", "tf32", "loader:num_workers=2:persistent_workers=true",
                 "compile:backend=eager"])
    assert res["status"] == "ok", res
    assert res["stopped"] and res["steps_timed"] >= 3 and res["loss_finite"] is True
    seen = observed(obs)[-1]
    # what the script's own TrainingArguments hold: the knobs, in HF's terms
    assert (seen["bf16"], seen["fp16"]) == (True, False)
    assert (seen["torch_compile"], seen["torch_compile_backend"]) == (True, "eager")
    assert (seen["dataloader_num_workers"], seen["dataloader_persistent_workers"]) == (2, True)
    assert seen["tf32"] is None and seen["tf32_flag"] is True  # no GPU: the flag, not the field
    # and what they did: the Trainer's loader, accelerate's bf16 autocast, Dynamo in forward
    assert (seen["num_workers"], seen["persistent_workers"]) == (2, True)
    assert seen["autocast"] is True and seen["compiled"] is True
    assert ("TrainingArguments(bf16=True, fp16=False, torch_compile=True, "
            "torch_compile_backend='eager', dataloader_num_workers=2, "
            "dataloader_persistent_workers=True)") in res["applied"]
    # the framework took bf16 and compile: the generic hooks stood down
    assert not any(a.startswith(("bf16 autocast", "torch.compile(")) for a in res["applied"])
    # output_dir="hf-out" went to the trial's scratch folder, whole checkpoints in it
    scratch = Path(json.loads(Path(res["log"]).with_suffix(".spec.json").read_text())["scratch"])
    assert Path(seen["output_dir"]) == scratch / "hf-out"
    assert not (tmp_path / "hf-out").exists()
    saved = _files(scratch)
    assert saved and all(f.startswith("hf-out/checkpoint-") for f in saved), saved
    last = max((scratch / "hf-out").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(os.listdir(last))
    # and the script's save_total_limit=2 rotation (shutil.rmtree) still works there
    assert len(list((scratch / "hf-out").glob("checkpoint-*"))) == 2, saved


def test_lightning_trainer_gets_bf16_precision_and_checkpoints_stay_in_scratch(tmp_path):
    obs = tmp_path / "seen.jsonl"
    res = trial(tmp_path, LIGHTNING, ["--observe", str(obs)], ["bf16"])
    assert res["status"] == "ok", res
    assert res["stopped"] and res["steps_timed"] >= 3 and res["loss_finite"] is True
    seen = observed(obs)[-1]
    assert seen["precision"] == "bf16-mixed"  # the script wrote precision="32-true"
    assert seen["autocast"] is True and seen["dtype"] == "torch.bfloat16"
    assert res["applied"] == ["Trainer(precision='bf16-mixed')"]  # no generic autocast as well
    scratch = Path(json.loads(Path(res["log"]).with_suffix(".spec.json").read_text())["scratch"])
    assert Path(seen["default_root_dir"]) == scratch / "pl-out"
    # ModelCheckpoint's files under default_root_dir, the script's save_checkpoint("last.ckpt")
    # at the same relative path, all in scratch; nothing in the user's folder
    saved = _files(scratch)
    assert "last.ckpt" in saved and "pl-out/checkpoints/epoch=0-step=2.ckpt" in saved, saved
    assert all(f == "last.ckpt" or f.startswith("pl-out/checkpoints/") for f in saved), saved
    assert not (tmp_path / "pl-out").exists() and not (tmp_path / "last.ckpt").exists()


def test_a_knob_no_framework_object_takes_fails_the_trial(tmp_path):
    """The HF script trains in one process: a DDP knob reaches nothing there, and the trial says
    so instead of measuring 1.00x (the output_dir redirection alone is no knob applied)."""
    res = trial(tmp_path, HF, ["--steps", "40"], ["ddp:bucket_cap_mb=50"])
    assert res["status"] == "failed" and "reached nothing" in res["reason"], res
    assert res["applied"] == []
