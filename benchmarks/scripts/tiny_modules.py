"""A launch-bound training loop on the CPU: a deep stack of tiny modules, so each step is
hundreds of small operators and the host's per-call cost is the whole step (as nanoGPT's
train_shakespeare_char is on an H100 without torch.compile). Logs each iteration as nanoGPT
does (``iter N: loss X, time Y ms``), which `benchmarks/real_script_ab.py` parses.

    python benchmarks/scripts/tiny_modules.py [--iters 400] [--blocks 12] [--dim 64] [--clock cpu]
"""

import argparse
import time

import torch
from torch import nn


class Block(nn.Module):
    """LayerNorm, MLP and a residual: the shape of a transformer block's MLP half."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.act(self.fc(self.ln(x))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this thread's CPU time per iteration, which other processes on a "
                    "shared machine barely move (what the in-process costs are measured with)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(*[Block(a.dim) for _ in range(a.blocks)], nn.Linear(a.dim, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(4, 8, a.dim), torch.randint(0, 16, (4 * 8,))
    clock = time.perf_counter if a.clock == "wall" else time.thread_time
    t0 = clock()
    for i in range(a.iters):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.view(-1, 16), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t1 = clock()
        print(f"iter {i}: loss {loss.item():.4f}, time {(t1 - t0) * 1000:.2f}ms", flush=True)
        t0 = t1


if __name__ == "__main__":
    main()
