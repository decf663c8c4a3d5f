"""A small Lightning run for the framework-detection fixtures (issue #13).

An MLP on random features, FP32 (``precision="32-true"``, Lightning's default), CPU or GPU.
``--profile DIR`` turns on Lightning's own PyTorchProfiler (its ``[Strategy]``,
``[LightningModule]``, ``[_TrainingEpochLoop]`` ranges) for a few steps; run plainly it is a
script for ``advisor profile``.
"""

import argparse

import lightning as L
import torch
from torch import nn


class Features(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8192

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(256, generator=g), torch.randint(0, 10, (), generator=g)


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(Features(), batch_size=64, num_workers=0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--profile")
    a = ap.parse_args()
    profiler = None
    if a.profile:
        from lightning.pytorch.profilers import PyTorchProfiler

        profiler = PyTorchProfiler(dirpath=a.profile, filename="lightning", export_to_chrome=True,
                                   schedule=torch.profiler.schedule(wait=5, warmup=2, active=3,
                                                                    repeat=1))
    trainer = L.Trainer(max_steps=a.steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, profiler=profiler)
    trainer.fit(Model())


if __name__ == "__main__":
    main()
