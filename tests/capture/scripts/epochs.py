"""A real multi-epoch loop: DataLoader with worker processes (restarted every epoch unless
--persistent), an evaluation pass and a torch.save checkpoint after each epoch.

Usage: python epochs.py [--epochs N] [--iters N] [--workers N] [--val-workers N] [--persistent]
                        [--out DIR]
"""

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--val-workers", type=int, default=0)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.iters * 16, 64)
    y = torch.randint(0, 4, (a.iters * 16,))
    train = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=a.workers,
                       persistent_workers=a.persistent and a.workers > 0)
    val = DataLoader(TensorDataset(x[:256], y[:256]), batch_size=64, num_workers=a.val_workers)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out = a.out or tempfile.mkdtemp()
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                   os.path.join(out, "ckpt.pt"))
        print(f"epoch {epoch}: acc {correct / 256:.3f}")
    print(f"epochs: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
