"""A tiny real training loop: MLP, DataLoader, loss module, backward, SGD.

Usage: python train_mlp.py [--epochs N] [--raise-at STEP] [--sigterm-at STEP] [--exit-code N]
"""

import argparse
import os
import signal
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=24)
    ap.add_argument("--raise-at", type=int, default=-1)
    ap.add_argument("--sigterm-at", type=int, default=-1,
                    help="send this process SIGTERM at that iteration, as a scheduler would")
    ap.add_argument("--exit-code", type=int, default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.iters * 8, 32)
    y = torch.randint(0, 4, (a.iters * 8,))
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (xb, yb) in enumerate(loader):
        if i == a.raise_at:
            raise RuntimeError(f"planted failure at iteration {i}")
        if i == a.sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)
        opt.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        opt.step()
    print(f"train_mlp: done {i + 1} iterations, argv={sys.argv[1:]}")
    if a.exit_code is not None:
        sys.exit(a.exit_code)
    return 0


if __name__ == "__main__":
    main()
