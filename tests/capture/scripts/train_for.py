"""A real training loop that runs for a set time, as a long job does (an MLP on a DataLoader).

Usage: python train_for.py [--seconds S] [--width W] [--exit-code N] [--log FILE]
                           [--exit-on-interrupt N]

Trains until ``--seconds`` have passed (CI keeps it short; a benchmark makes it minutes), then
prints one line to stdout and exits with ``--exit-code``. ``--log FILE`` appends one line per
step, ``<unix time> <step seconds>``: the job's own step times, as a training script logs them.
``--exit-on-interrupt N`` shuts down on Ctrl-C with exit code N, as Lightning's Trainer does.
"""

import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--exit-on-interrupt", type=int, default=None)
    a = ap.parse_args()
    try:
        return train(a)
    except KeyboardInterrupt:
        if a.exit_on_interrupt is None:
            raise
        print("train_for: interrupted, shutting down", file=sys.stderr)
        sys.exit(a.exit_on_interrupt)


def train(a: argparse.Namespace) -> int:
    torch.manual_seed(0)
    w = a.width
    x = torch.randn(4096, w)
    y = torch.randint(0, 10, (4096,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 10))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    log = open(a.log, "a") if a.log else None  # noqa: SIM115 (held for the whole run)
    start = time.time()
    steps = 0
    last = time.perf_counter()
    while time.time() - start < a.seconds:
        for xb, yb in loader:
            opt.zero_grad()
            criterion(model(xb), yb).backward()
            opt.step()
            steps += 1
            now = time.perf_counter()
            if log is not None:
                log.write(f"{time.time():.6f} {now - last:.6f}\n")
            last = now
            if time.time() - start >= a.seconds:
                break
    if log is not None:
        log.close()
    print(f"train_for: done {steps} steps in {time.time() - start:.1f} s")
    return a.exit_code


if __name__ == "__main__":
    sys.exit(main())
