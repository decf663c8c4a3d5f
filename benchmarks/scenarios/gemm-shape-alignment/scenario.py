"""gemm-shape-alignment: a GPT-2-size language model whose vocabulary is not a multiple of 8.

bad : vocabulary 50257 (GPT-2's tokenizer): the logits GEMM (8192 x 768 x 50257) and its two
      backward GEMMs have a size that is not a multiple of 8, so cuBLAS runs them on
      low-alignment BF16 kernels.
good: vocabulary padded to 50304 (a multiple of 64, as nanoGPT does); the 47 extra logits are
      never targets (targets are drawn from the 50257 real tokens in both variants).
Model: token embedding + 4 x [LayerNorm -> Linear(768,3072) -> GELU -> Linear(3072,768),
residual] + LayerNorm + LM head, bf16 autocast, 8 x 1024 tokens, fused AdamW.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, D, FF, DEPTH, VOCAB = 8192, 768, 3072, 4, 50257
if os.environ.get("SCENARIO_TINY"):  # a CPU smoke run
    TOKENS, D, FF, DEPTH = 64, 64, 256, 1
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    TOKENS, D, FF, DEPTH, VOCAB = 4096, 1024, 4096, 4, 32001  # a Llama-size vocabulary
PADDED = (VOCAB + 63) // 64 * 64  # 50304
POOL = 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class LanguageModel(nn.Module):
    """Embedding, blocks, LayerNorm and LM head as one module, so that the harness's ``--fix``
    (torch.compile of ``.model``) can time compiler-fusion's fix on this step; the layers are
    built in the order the captures' program built them, so the weights are the same."""

    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, D)
        self.blocks = nn.Sequential(*[Block() for _ in range(DEPTH)])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, vocab, bias=False)

    def forward(self, x):
        return self.head(self.ln(self.blocks(self.embed(x))))


def next_token_loss(logits, y):
    """The loss after the model, a function of its own so that the harness's ``--fix
    compile-loss`` can compile it as compiler-fusion's fix names (the kernels are the same)."""
    return F.cross_entropy(logits.float(), y)


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        dev = torch.device(device)
        vocab = VOCAB if variant == "bad" else PADDED
        self.model = LanguageModel(vocab).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=dev.type == "cuda")
        # token ids and targets from the real vocabulary only, in both variants
        self.px = torch.randint(0, VOCAB, (POOL, TOKENS), device=dev)
        self.py = torch.randint(0, VOCAB, (POOL, TOKENS), device=dev)
        self.dev = dev
        self.i = 0
        self.loss_fn = next_token_loss
        self.info = {"tokens": TOKENS, "d": D, "ff": FF, "depth": DEPTH, "vocab": vocab,
                     "precision": "bf16 autocast"}

    def step(self, mark):
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
            with torch.autocast(self.dev.type, dtype=torch.bfloat16):
                logits = self.model(x)
        with mark("loss"):
            loss = self.loss_fn(logits, y)
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

    standalone(build, device_flag=True)
