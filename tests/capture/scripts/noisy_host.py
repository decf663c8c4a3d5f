"""A tiny real training loop whose host gets busy partway: from ``--noise-from`` on, four more
threads of the same process spin in Python, so the loop waits for the interpreter lock whenever
it hands it over (at the latest every switch interval), as a job does on a machine shared with
other work: most steps run at their pace, some wait tens of milliseconds.

Usage: python noisy_host.py [--iters N] [--noise-from STEP]
"""

import argparse
import sys
import threading

import torch
from torch import nn


def spin(stop: threading.Event) -> None:
    """Pure-Python busy work: holds the interpreter lock for a switch interval at a time."""
    n = 0
    while not stop.is_set():
        n += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--noise-from", type=int, default=12)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(8)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 64), torch.randn(16, 64)
    stop = threading.Event()
    for i in range(a.iters):
        if i == a.noise_from:
            sys.setswitchinterval(0.01)  # a spinning thread keeps the lock 10 ms at a time
            for _ in range(4):
                threading.Thread(target=spin, args=(stop,), daemon=True).start()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    stop.set()
    print(f"noisy_host: done {a.iters} iterations")
    return 0


if __name__ == "__main__":
    main()
