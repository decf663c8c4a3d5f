"""A small Hugging Face Trainer run for the framework-detection fixtures (issue #13).

GPT-2 architecture (2 layers, d 64) on random token ids, FP32 (the Trainer's default), CPU or
GPU, whatever is there. ``--stack-trace FILE`` records 3 steps with torch.profiler's Python
stacks (``with_stack=True``) into FILE, the way a user's own profiling would; run plainly it is
a script for ``advisor profile``. Neither downloads anything.
"""

import argparse
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> dict:
        x = torch.randint(0, 1000, (64,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": x, "labels": x}


class StepProfiler(TrainerCallback):
    def __init__(self, prof) -> None:
        self.prof = prof

    def on_step_end(self, args, state, control, **kwargs):
        self.prof.step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--stack-trace")
    a = ap.parse_args()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2,
                                       n_head=2))
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=a.steps,
                             per_device_train_batch_size=8, report_to=[], save_strategy="no",
                             logging_steps=10, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    if not a.stack_trace:
        trainer.train()
        return
    sched = torch.profiler.schedule(wait=5, warmup=2, active=3, repeat=1)
    with torch.profiler.profile(schedule=sched, with_stack=True, on_trace_ready=lambda p:
                                p.export_chrome_trace(a.stack_trace)) as prof:
        trainer.add_callback(StepProfiler(prof))
        trainer.train()


if __name__ == "__main__":
    main()
