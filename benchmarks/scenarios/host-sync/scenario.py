"""host-sync: synchronisations left in a GPU-bound training step (outside the loss).

bad : three host syncs per step outside the loss, each followed by ~1 ms of real host work:
        forward  : torch.cuda.synchronize() (left-over timing code), then host metrics
                   (numpy percentiles/histogram of host data prepared in advance);
        backward : loss.item() for the log line, then the log line's string formatting;
        optimizer: .item() finite check of the grad norm before opt.step(), then host
                   bookkeeping (numpy).
      Each sync drains the GPU queue, so the host work after it (and the launches after
      that) run while the GPU idles.
good: the same host work at the same places, without the syncs: the loss and the grad
      norm stay on the GPU (written into device ring buffers, read by the user at logging
      time), the log line is formatted from the same host data; the host work then
      overlaps the GPU's execution of the already-queued kernels.
Model: a long-context transformer, 2 pre-LN layers (d 768, 12 heads, causal SDPA over one
16384-token sequence, MLP 768 -> 768 ReLU, no bias), bf16 params, AdamW(foreach), MSE
loss.  GEMMs ~19 GFLOP each (< 40 us on H100); attention dominates the ~11 ms of GPU work
with few, long kernels, so the step stays GPU-bound even on a slow host (measured on the
H100 machine: ~30 us of host time per eager kernel launch, ~2x that under a profiler).
The grad-norm check never fires, so both variants compute the same updates.
"""

import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, D, HEADS, FF, DEPTH = 1, 16384, 768, 12, 768, 2
BATCH, SEQ, D, HEADS, FF, DEPTH = {"tiny": (1, 128, 64, 4, 64, 2), "check": (2, 8192, 1024, 16, 1024, 2)}.get(
    "tiny" if os.environ.get("SCENARIO_TINY") else os.environ.get("SCENARIO_SHAPE"), (BATCH, SEQ, D, HEADS, FF, DEPTH))
TOKENS = BATCH * SEQ
POOL = 4
HOST_N = 200_000 if os.environ.get("SCENARIO_SHAPE") == "check" else 140_000  # host work (~1 ms a call)
RING = 1024


class Layer(nn.Module):
    """Pre-LN transformer layer: causal SDPA attention + ReLU MLP, no bias."""

    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF, bias=False)
        self.fc2 = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.ln1(x)
        q, k, v = (m(h).view(b, s, HEADS, D // HEADS).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, D))
        return x + self.fc2(F.relu(self.fc1(self.ln2(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Layer() for _ in range(DEPTH))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class HostWork:
    """~1 ms of host work per call on data prepared in advance (same in both variants)."""

    def __init__(self):
        rng = np.random.default_rng(5)
        self.scores = rng.standard_normal(HOST_N // 7).astype(np.float32)
        self.stats = rng.random(800)
        self.lrs = rng.random(HOST_N)
        self.t = {"metrics": [], "log": [], "bookkeeping": []}

    def metrics(self):
        t0 = time.perf_counter()
        q = np.percentile(self.scores, [50.0, 90.0, 99.0])
        h, _ = np.histogram(self.scores, bins=64, range=(-4.0, 4.0))
        r = float(q.sum()) + float(h.max())
        self.t["metrics"].append(time.perf_counter() - t0)
        return r

    def log_line(self, step, loss_value):
        t0 = time.perf_counter()
        line = f"step {step} loss {loss_value} " + " ".join(f"{k}={v:.6f}" for k, v in enumerate(self.stats))
        self.t["log"].append(time.perf_counter() - t0)
        return len(line)

    def bookkeeping(self):
        t0 = time.perf_counter()
        w = np.cumsum(self.lrs)
        r = float(np.sort(self.lrs[: HOST_N // 4])[-1] + w[-1])
        self.t["bookkeeping"].append(time.perf_counter() - t0)
        return r


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        dev = torch.device(device)
        self.dev = dev
        self.variant = variant
        self.model = Net().to(dev, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, BATCH, SEQ, D, device=dev, dtype=torch.bfloat16)
        self.py = torch.randn(POOL, BATCH, SEQ, D, device=dev)
        self.i = 0
        self.host = HostWork()
        self.logged = []                      # bad: host floats
        self.loss_ring = torch.zeros(RING, device=dev)   # good: kept on the GPU
        self.gn_ring = torch.zeros(RING, device=dev)
        self.skipped = 0
        self.sink = 0.0
        self._info = {"batch": BATCH, "seq": SEQ, "d": D, "heads": HEADS, "ff": FF, "layers": DEPTH,
                     "dtype": "bf16 params",
                     "syncs": "3 per step (synchronize, loss.item, grad-norm .item)" if variant == "bad" else "none",
                     "host_work": "3 x ~1 ms per step (numpy metrics, log formatting, bookkeeping)"}

    @property
    def info(self):
        """Read by the harness after the measured steps (kept out of the step itself)."""
        d = dict(self._info)
        d["host_work_ms"] = {k: round(1e3 * float(np.median(v)), 3) for k, v in self.host.t.items() if v}
        return d

    def _sync(self):
        if self.dev.type == "cuda":
            torch.cuda.synchronize()

    def step(self, mark):
        bad = self.variant == "bad"
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
            out = self.model(x)
            if bad:
                self._sync()
            self.sink += self.host.metrics()
        with mark("loss"):
            loss = F.mse_loss(out.float(), y)
        with mark("backward"):
            loss.backward()
            if bad:
                lv = loss.item()                       # logged every step
                self.logged.append(lv)
            else:
                self.loss_ring[self.i % RING] = loss.detach()   # read at logging time
                lv = "(on device)"
            self.sink += self.host.log_line(self.i, lv)
        with mark("optimizer"):
            gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
            if bad:
                if not math.isfinite(gn.item()):
                    self.skipped += 1
            else:
                self.gn_ring[self.i % RING] = gn
            self.sink += self.host.bookkeeping()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


def build(variant: str, device: str = "cuda"):
    return Scenario(variant, device)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness import standalone  # the timing loop every scenario shares

    standalone(build, device_flag=True, note=lambda s: f"; host work {s.info.get('host_work_ms')}")
