"""host-sync: synchronisations left in the training step (outside the loss).

bad : torch.cuda.synchronize() after forward and after backward (left-over timing
      code), loss.item() logged every step, and an .item()-based finite check of the
      grad norm in the optimizer phase.  Each sync drains the GPU queue, so the host's
      launch work for the next phase is no longer hidden behind GPU work.
good: the same step without the syncs: the loss is accumulated on the device (read
      once by the user at logging time), the grad norm is clipped without reading it.
Model: 16 x [LayerNorm(1024) -> Linear(1024,1024) -> GELU] residual blocks + head,
8192 tokens, bf16 autocast, fp32 params, AdamW(foreach).  The check never fires, so
both variants compute the same updates.
"""

import argparse
import contextlib
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, D, DEPTH = 8192, 1024, 16
POOL = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        return x + F.gelu(self.fc(self.ln(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
        self.head = nn.Linear(D, D)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = Net().to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, TOKENS, D, device=dev)
        self.py = torch.randn(POOL, TOKENS, D, device=dev)
        self.i = 0
        self.losses = []
        self.loss_sum = torch.zeros((), device=dev)
        self.skipped = 0
        self.info = {"tokens": TOKENS, "d": D, "depth": DEPTH, "autocast": "bf16"}

    def step(self, mark):
        bad = self.variant == "bad"
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = self.model(x)
            if bad:
                torch.cuda.synchronize()
        with mark("loss"):
            loss = F.mse_loss(out.float(), y)
            if bad:
                self.losses.append(loss.item())  # logged every step
            else:
                self.loss_sum += loss.detach()
        with mark("backward"):
            loss.backward()
            if bad:
                torch.cuda.synchronize()
        with mark("optimizer"):
            gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
            if bad and not math.isfinite(gn.item()):
                self.skipped += 1
                self.opt.zero_grad(set_to_none=True)
                return
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


def build(variant: str, device: str = "cuda"):
    return Scenario(variant, device)


def _nomark(name):
    return contextlib.nullcontext()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="bad", choices=["bad", "good"])
    ap.add_argument("--steps", type=int, default=60)
    a = ap.parse_args()
    s = build(a.variant, "cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        s.step(_nomark)
    torch.cuda.synchronize()
    print(f"{a.variant}: {a.steps} steps, {(time.perf_counter() - t0) * 1e3 / a.steps:.3f} ms/step")
