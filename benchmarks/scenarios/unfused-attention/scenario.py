"""unfused-attention: attention materialising the full S x S score matrix.

bad : q @ k^T, scale, causal masked_fill, softmax (fp32), @ v -- the S x S scores and
      probabilities are written to and read back from HBM (forward and backward).
good: F.scaled_dot_product_attention(q, k, v, is_causal=True) (flash backend), all else
      identical.  No dropout anywhere.
Model: 2 pre-LN transformer blocks, batch 4, S = 2048, d = 1024 (16 heads x 64),
MLP 4096, bf16 params, AdamW(foreach).
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCENARIOS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _SCENARIOS not in sys.path:
    sys.path.insert(0, _SCENARIOS)
from gelu_epilogue import gelu_linear  # noqa: E402  the GEMM+GELU site (`--fix gelu-epilogue` fuses it)

BATCH, S, D, H, FF, DEPTH = 4, 2048, 1024, 16, 4096, 2
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    BATCH, S, D, H, FF, DEPTH = 8, 1024, 768, 12, 3072, 3
DH = D // H
POOL = 2


class Block(nn.Module):
    def __init__(self, fused):
        super().__init__()
        self.fused = fused
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)
        self.register_buffer("causal", torch.ones(S, S, dtype=torch.bool).triu(1), persistent=False)

    def attn(self, q, k, v):
        if self.fused:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = (q @ k.transpose(-2, -1)) * (DH ** -0.5)
        scores = scores.masked_fill(self.causal, float("-inf"))
        p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return p @ v

    def forward(self, x):
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, S, 3, H, DH).permute(2, 0, 3, 1, 4)
        a = self.attn(q, k, v).transpose(1, 2).reshape(b, S, D)
        x = x + self.proj(a)
        return x + self.fc2(gelu_linear(self.fc1, self.ln2(x)))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = nn.Sequential(*[Block(variant == "good") for _ in range(DEPTH)]).to(dev, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, BATCH, S, D, device=dev, dtype=torch.bfloat16)
        self.py = torch.randn(POOL, BATCH, S, D, device=dev, dtype=torch.bfloat16)
        self.i = 0
        self.info = {"batch": BATCH, "seq": S, "heads": H, "head_dim": DH, "depth": DEPTH,
                     "attention": "sdpa(is_causal)" if variant == "good" else "matmul+mask+softmax+matmul"}

    def step(self, mark):
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
            out = self.model(x)
        with mark("loss"):
            loss = F.mse_loss(out.float(), y.float())
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

    standalone(build)
