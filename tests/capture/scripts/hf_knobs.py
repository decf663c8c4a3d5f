"""A tiny Hugging Face Trainer run for `advisor profile --try`: it reports, from inside, what
reached it.

A small MLP (a plain `torch.nn.Module` returning ``{"loss": ...}``, which the Trainer takes) on
random features, on the CPU (``use_cpu=True``, as a CPU user writes it: HF refuses ``bf16`` on a
machine without a GPU otherwise), checkpoints every 2 steps into ``--output-dir`` (relative to
the working directory). ``--observe FILE`` appends one JSON line per step with what the script
sees: its `TrainingArguments`' knob fields and ``output_dir``, the Trainer's DataLoader settings,
whether autocast is on in forward, whether forward runs compiled, and the TF32 flag. Nothing is
downloaded.

    python hf_knobs.py [--steps N] [--observe FILE] [--output-dir DIR]
"""

import argparse
import json

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

SEEN = {"compiling": False, "autocast": None}


class Features(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(16, generator=g), "labels": torch.randn(1, generator=g)}


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 1))

    def forward(self, x, labels=None):
        if torch.compiler.is_compiling():
            SEEN["compiling"] = True
        SEEN["autocast"] = torch.is_autocast_enabled("cpu")
        out = self.body(x)
        loss = torch.nn.functional.mse_loss(out.float(), labels)
        return {"loss": loss, "logits": out}


class Observe(TrainerCallback):
    def __init__(self, path: str) -> None:
        self.path = path
        self.trainer = None

    def on_step_end(self, args, state, control, **kwargs):
        loader = kwargs.get("train_dataloader")
        base = getattr(loader, "base_dataloader", loader)  # accelerate's wrapper
        with open(self.path, "a") as fh:
            fh.write(json.dumps({
                "step": state.global_step, "bf16": args.bf16, "fp16": args.fp16,
                "tf32": args.tf32, "torch_compile": args.torch_compile,
                "torch_compile_backend": args.torch_compile_backend,
                "dataloader_num_workers": args.dataloader_num_workers,
                "dataloader_persistent_workers": args.dataloader_persistent_workers,
                "output_dir": args.output_dir,
                "num_workers": getattr(base, "num_workers", None),
                "persistent_workers": getattr(base, "persistent_workers", None),
                "autocast": SEEN["autocast"], "compiled": SEEN["compiling"],
                "tf32_flag": torch.backends.cuda.matmul.allow_tf32}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--observe")
    ap.add_argument("--output-dir", default="hf-out")
    a = ap.parse_args()
    torch.manual_seed(0)
    args = TrainingArguments(output_dir=a.output_dir, max_steps=a.steps, use_cpu=True,
                             per_device_train_batch_size=8, report_to=[], save_strategy="steps",
                             save_steps=2, save_total_limit=2, logging_steps=1000,
                             dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=Net(), args=args, train_dataset=Features())
    if a.observe:
        trainer.add_callback(Observe(a.observe))
    trainer.train()


if __name__ == "__main__":
    main()
