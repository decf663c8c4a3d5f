"""A tiny Lightning run for `advisor profile --try`: it reports, from inside, what reached it.

A small MLP on random features on the CPU, FP32 as written (``precision="32-true"``), with a
`ModelCheckpoint` every 2 steps under ``--root`` (``default_root_dir``, relative to the working
directory) and an explicit ``trainer.save_checkpoint("last.ckpt")`` every 2 steps (relative to the
working directory).
``--observe FILE`` appends one JSON line per step with what the script sees: the Trainer's
precision and ``default_root_dir``, whether autocast (and which dtype) is on in forward, and the
DataLoader's settings. Nothing is downloaded.

    python lightning_knobs.py [--steps N] [--observe FILE] [--root DIR]
"""

import argparse
import json

import lightning as L
import torch
from torch import nn

SEEN: dict = {"autocast": None, "dtype": None}


class Features(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), torch.randn(1, generator=g)


class Model(L.LightningModule):
    def __init__(self, observe: str | None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
        self.observe = observe

    def forward(self, x):
        SEEN["autocast"] = torch.is_autocast_enabled("cpu")
        SEEN["dtype"] = str(torch.get_autocast_dtype("cpu")) if SEEN["autocast"] else None
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x).float(), y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.trainer.global_step % 2 == 0:
            self.trainer.save_checkpoint("last.ckpt")
        if self.observe:
            t, loader = self.trainer, self.trainer.train_dataloader
            with open(self.observe, "a") as fh:
                fh.write(json.dumps({
                    "step": t.global_step, "precision": t.precision,
                    "default_root_dir": t.default_root_dir,
                    "autocast": SEEN["autocast"], "dtype": SEEN["dtype"],
                    "num_workers": getattr(loader, "num_workers", None)}) + "\n")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(Features(), batch_size=8)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--observe")
    ap.add_argument("--root", default="pl-out")
    a = ap.parse_args()
    torch.manual_seed(0)
    ckpt = L.pytorch.callbacks.ModelCheckpoint(every_n_train_steps=2, save_top_k=-1)
    trainer = L.Trainer(max_steps=a.steps, accelerator="cpu", devices=1, precision="32-true",
                        default_root_dir=a.root, logger=False, callbacks=[ckpt],
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(a.observe))


if __name__ == "__main__":
    main()
