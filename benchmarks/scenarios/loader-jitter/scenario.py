"""loader-jitter: an input pipeline that allocates at random steps.

Both variants do the same, constant-cost decode in the data phase (numpy: a fixed-size
uint8 "compressed" record -> normalised float32 features, a few passes; no random variation
in its cost) of a fixed-shape batch (16384 tokens x 64 features, fp32, 4 MiB), copy it to
the GPU with non_blocking=True from pinned memory, and train the same model on it.
bad : the staging buffers are allocated per batch at a size taken from the record (varies
      per step, 1-4x the batch): torch.empty(n_alloc, pin_memory=True) and a new device
      tensor; and at random steps (p = 0.2, seeded) the loop "frees memory" with
      torch.cuda.empty_cache() + the host pinned-cache flush.  So cudaFree / cudaFreeHost /
      cudaHostAlloc / cudaMalloc (for the input and every activation) recur at random steps,
      and those steps are slow; the other steps reuse cached blocks.
good: one pinned host buffer pair (double-buffered, guarded by events) and one device
      buffer preallocated at the maximum size and reused (views); decode writes straight into
      the pinned buffer.  No allocation in steady state: a tight step-time distribution.
Model: input projection 64 -> 768, a long-context transformer of 2 pre-LN layers (d 768, 12
heads, causal SDPA over the 16384-token sequence, MLP 768 -> 768 ReLU, no bias), output head
768 -> 64, MSE to the input; bf16 params, AdamW(foreach).  GEMMs ~19 GFLOP each (< 40 us on
H100); ~11 ms of GPU work per step in few, long kernels, so the constant decode (~2 ms) and
the launches overlap the GPU (nothing in the good step syncs).
"""

import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEQ, FIN, D, HEADS, FF, DEPTH = 16384, 64, 768, 12, 768, 2
SEQ, FIN, D, HEADS, FF, DEPTH = {"tiny": (256, 16, 64, 4, 64, 2), "check": (8192, 128, 1024, 16, 1024, 3)}.get(
    "tiny" if os.environ.get("SCENARIO_TINY") else os.environ.get("SCENARIO_SHAPE"), (SEQ, FIN, D, HEADS, FF, DEPTH))
TOKENS = SEQ
N = TOKENS * FIN            # elements of one batch
NMAX = 4 * N                # largest staging size a record asks for
P_FLUSH = 0.2
FLUSH_SEED = 37             # chosen so that the harness's measured windows hold flush steps
DECODE_PASSES = 1


def host_empty_cache():
    f = getattr(torch._C, "_host_emptyCache", None)
    if f is not None:
        f()
        return True
    return False


def flush_steps(n_steps, seed=FLUSH_SEED, p=P_FLUSH):
    """Indices of the steps at which bad flushes (same sequence the scenario draws)."""
    r = np.random.default_rng(seed)
    return [i for i in range(n_steps) if r.random() < p]


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
        self.inp = nn.Linear(FIN, D)
        self.blocks = nn.ModuleList(Layer() for _ in range(DEPTH))
        self.out = nn.Linear(D, FIN)

    def forward(self, x):
        h = self.inp(x.to(torch.bfloat16)).unsqueeze(0)  # one sequence of SEQ tokens
        for b in self.blocks:
            h = b(h)
        return self.out(h.squeeze(0))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        self.dev = torch.device(device)
        self.cuda = self.dev.type == "cuda"
        self.variant = variant
        self.model = Net().to(self.dev, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.rng = np.random.default_rng(1234)        # record sizes (same in both variants)
        self.frng = np.random.default_rng(FLUSH_SEED)  # flush decisions (bad only)
        self.src = [np.random.default_rng(7 + k).integers(0, 256, N, dtype=np.uint8) for k in range(2)]
        self.tmp = np.empty(N, dtype=np.float32)
        self.flushes = []
        self.i = 0
        self.t_decode = []
        self._info = {"seq": SEQ, "fin": FIN, "d": D, "heads": HEADS, "ff": FF, "layers": DEPTH,
                     "batch_mib": N * 4 / 2**20, "staging_max_mib": NMAX * 4 / 2**20,
                     "p_flush": P_FLUSH if variant == "bad" else 0.0,
                     "host_empty_cache_available": hasattr(torch._C, "_host_emptyCache")}
        if variant == "good":
            pin = self.cuda
            self.pinned = [torch.empty(NMAX, dtype=torch.float32, pin_memory=pin) for _ in range(2)]
            self.pinned_np = [p.numpy() for p in self.pinned]
            self.copied = [None, None]
            self.dbuf = torch.empty(NMAX, dtype=torch.float32, device=self.dev)
            self.k = 0

    @property
    def info(self):
        """Read by the harness after the measured steps (kept out of the step itself)."""
        d = dict(self._info)
        if self.t_decode:
            d["decode_ms_median"] = round(1e3 * float(np.median(self.t_decode)), 3)
        d["flush_steps"] = list(self.flushes)
        return d

    def _decode(self, out):
        """Constant-cost decode of this step's record into `out` (N float32)."""
        t0 = time.perf_counter()
        src = self.src[self.i & 1]
        np.multiply(src, np.float32(1.0 / 255.0), out=out, casting="unsafe")
        for _ in range(DECODE_PASSES):
            np.subtract(out, np.float32(0.5), out=self.tmp)
            np.multiply(self.tmp, np.float32(3.4641), out=out)
        self.t_decode.append(time.perf_counter() - t0)
        return out

    def step(self, mark):
        with mark("data"):
            n_alloc = N + int(self.rng.integers(0, NMAX - N + 1))  # size asked for by this record
            if self.variant == "bad":
                if self.frng.random() < P_FLUSH:
                    if self.cuda:
                        torch.cuda.empty_cache()
                        host_empty_cache()
                    self.flushes.append(self.i)
                staging = torch.empty(n_alloc, dtype=torch.float32, pin_memory=self.cuda)
                self._decode(staging.numpy()[:N])
                dev = torch.empty(n_alloc, dtype=torch.float32, device=self.dev)
                x = dev[:N].view(TOKENS, FIN)
                x.copy_(staging[:N].view(TOKENS, FIN), non_blocking=True)
            else:
                k = self.k
                self.k ^= 1
                if self.copied[k] is not None:
                    self.copied[k].synchronize()  # the copy that last read this buffer is done
                self._decode(self.pinned_np[k][:N])
                x = self.dbuf[:N].view(TOKENS, FIN)
                x.copy_(self.pinned[k][:N].view(TOKENS, FIN), non_blocking=True)
                if self.cuda:
                    ev = torch.cuda.Event()
                    ev.record()
                    self.copied[k] = ev
            self.i += 1
        with mark("forward"):
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


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness import standalone  # the timing loop every scenario shares

    standalone(build, device_flag=True, note=lambda s: f", decode {s.info.get('decode_ms_median')} ms, flushes at {s.flushes}")
