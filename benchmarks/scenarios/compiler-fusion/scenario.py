"""compiler-fusion (and fp8-candidate routes): a GPT-style LM step in eager mode.

A pre-LN decoder (LayerNorm, causal SDPA attention, GELU MLP, residual adds, tied embedding,
cross-entropy), bf16 autocast over fp32 master weights, fused AdamW, 1024-token sequences.
In eager mode every LayerNorm, GELU, residual add, dropout-free bias/scale and the loss's
softmax run as their own memory-bound kernels around the GEMMs.

Variants are ``<size>-<route>``:

size   gpt2: d 768, 12 layers, 12 heads, batch 16 (GPT-2 124M shape)
       wide: d 2560, 8 layers, 20 heads, batch 8 (GEMMs large enough for FP8 to pay)
route  eager        the anti-pattern (bad)
       compile      ``torch.compile(model)``: Inductor fuses the memory-bound chains
       fp8          torchao float8 training (tensorwise dynamic scaling), eager
       fp8-compile  the same, compiled (the casts and amax reductions fuse)

``bad`` = ``gpt2-eager`` and ``good`` = ``gpt2-compile`` for the harness's defaults.
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

_SCENARIOS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _SCENARIOS not in sys.path:
    sys.path.insert(0, _SCENARIOS)
from gelu_epilogue import gelu_linear  # noqa: E402  the GEMM+GELU site (`--fix gelu-epilogue` fuses it)

SIZES = {"gpt2": dict(d=768, layers=12, heads=12, batch=16),
         "wide": dict(d=2560, layers=8, heads=20, batch=8)}
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    SIZES["gpt2"] = dict(d=1024, layers=8, heads=16, batch=8)
ROUTES = ("eager", "compile", "fp8", "fp8-compile")
VARIANTS = (*(f"{s}-{r}" for s in SIZES for r in ROUTES), "bad", "good")
SEQ, VOCAB, POOL = 1024, 50304, 2


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(gelu_linear(self.fc, self.ln2(x)))


class GPT(nn.Module):
    def __init__(self, d, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(SEQ, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.wte.weight
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if n.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


class Scenario:
    def __init__(self, variant, device):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
        variant = {"bad": "gpt2-eager", "good": "gpt2-compile"}.get(variant, variant)
        size, route = variant.split("-", 1)
        cfg = SIZES[size]
        torch.manual_seed(0)
        dev = torch.device(device)
        model = GPT(cfg["d"], cfg["layers"], cfg["heads"]).to(dev)
        if route.startswith("fp8"):
            from torchao.float8 import convert_to_float8_training

            # every block linear (dims are multiples of 16); the tied head stays bf16
            convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn.startswith("blocks."))
        self.model = torch.compile(model) if route.endswith("compile") else model
        self.opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda")
        g = torch.Generator(device="cpu").manual_seed(1)
        self.px = torch.randint(0, VOCAB, (POOL, cfg["batch"], SEQ + 1), generator=g).to(dev)
        self.i = 0
        self.info = {"size": size, "route": route, **cfg, "seq": SEQ, "vocab": VOCAB,
                     "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}

    def step(self, mark):
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j, :, :-1], self.px[j, :, 1:]
        with mark("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(x, y)
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

    standalone(build, variants=VARIANTS, warmup=5)
