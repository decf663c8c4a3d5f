"""loader-jitter: an input pipeline that allocates at random steps.

Both variants draw the same variable-length batches (16 x L x 512 fp32, L uniform in
[256, 1024], multiple of 8) from a seeded RNG and do the same decode-like CPU work in the
data phase (numpy: one scaling pass of a host source buffer into the batch buffer).
bad : each step decodes into a freshly allocated numpy array, pins it with .pin_memory()
      (a new pinned block whenever the host cache has none of that size), copies it into a
      freshly allocated device tensor, and at random steps (p = 0.3, separate seeded RNG)
      "frees memory" with torch.cuda.empty_cache() + the host pinned-cache flush, so
      cudaHostAlloc / cudaFreeHost / cudaMalloc / cudaFree recur at random steps.
good: one pinned host buffer pair (double-buffered, guarded by events) and one device
      buffer preallocated at the maximum sample size and reused (views of the actual
      size); decode writes straight into the pinned buffer.
Model: 4 x [Linear(512,2048) -> GELU -> Linear(2048,512), residual] autoencoder,
bf16 autocast, AdamW(foreach), MSE loss to the input.
"""

import argparse
import contextlib
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, D, FF, DEPTH = 16, 512, 2048, 4
LMIN, LMAX = 256, 1024
P_FLUSH = 0.3


def host_empty_cache():
    f = getattr(torch._C, "_host_emptyCache", None)
    if f is not None:
        f()
        return True
    return False


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        self.dev = torch.device(device)
        self.variant = variant
        self.model = nn.Sequential(*[Block() for _ in range(DEPTH)]).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.rng = np.random.default_rng(1234)      # batch sizes (same in both variants)
        self.frng = np.random.default_rng(99)       # flush decisions (bad only)
        nmax = BATCH * LMAX * D
        self.src = np.random.default_rng(7).standard_normal(nmax, dtype=np.float32)
        self.flushes = 0
        self.info = {"batch": BATCH, "L": [LMIN, LMAX], "d": D, "p_flush": P_FLUSH if variant == "bad" else 0.0}
        if variant == "good":
            self.pinned = [torch.empty(nmax, dtype=torch.float32, pin_memory=True) for _ in range(2)]
            self.pinned_np = [p.numpy() for p in self.pinned]
            self.copied = [None, None]
            self.dbuf = torch.empty(nmax, dtype=torch.float32, device=self.dev)
            self.k = 0
        else:
            self.info["host_empty_cache_available"] = hasattr(torch._C, "_host_emptyCache")

    def _decode(self, n, out):
        # decode-like CPU work: one scaling pass over the sample
        np.multiply(self.src[:n], np.float32(0.5), out=out)
        return out

    def step(self, mark):
        with mark("data"):
            L = int(self.rng.integers(LMIN // 8, LMAX // 8 + 1)) * 8
            n = BATCH * L * D
            if self.variant == "bad":
                if self.frng.random() < P_FLUSH:
                    torch.cuda.empty_cache()
                    host_empty_cache()
                    self.flushes += 1
                arr = self._decode(n, np.empty(n, dtype=np.float32))
                pinned = torch.from_numpy(arr).pin_memory()
                x = pinned.to(self.dev, non_blocking=True).view(BATCH, L, D)
            else:
                k = self.k
                self.k ^= 1
                if self.copied[k] is not None:
                    self.copied[k].synchronize()  # the copy that last read this buffer is done
                self._decode(n, self.pinned_np[k][:n])
                x = self.dbuf[:n].view(BATCH, L, D)
                x.copy_(self.pinned[k][:n].view(BATCH, L, D), non_blocking=True)
                ev = torch.cuda.Event()
                ev.record()
                self.copied[k] = ev
        with mark("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = self.model(x)
        with mark("loss"):
            loss = F.mse_loss(out.float(), x)
        with mark("backward"):
            loss.backward()
        with mark("optimizer"):
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
