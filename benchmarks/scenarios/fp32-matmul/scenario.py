"""fp32-matmul: a GEMM-heavy model trained in plain FP32 with TF32 off.

bad : fp32 everything, torch.backends.cuda.matmul.allow_tf32 = False and
      torch.backends.cudnn.allow_tf32 = False: GEMMs run on the FP32 SIMT path.
good: identical model, data, optimizer and TF32 flags, forward under
      torch.autocast("cuda", dtype=torch.bfloat16): GEMMs on bf16 tensor cores.
Model: 3 x [LayerNorm -> Linear(2048,8192) -> GELU -> Linear(8192,2048), residual],
4096 tokens, AdamW(foreach), fp32 params.
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

TOKENS, D, FF, DEPTH = 4096, 2048, 8192, 3
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    TOKENS, D, FF, DEPTH = 8192, 1024, 4096, 4
POOL = 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)

    def forward(self, x):
        return x + self.fc2(gelu_linear(self.fc1, self.ln(x)))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = nn.Sequential(*[Block() for _ in range(DEPTH)]).to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, TOKENS, D, device=dev)
        self.py = torch.randn(POOL, TOKENS, D, device=dev)
        self.i = 0
        self.info = {"tokens": TOKENS, "d": D, "ff": FF, "depth": DEPTH,
                     "precision": "fp32, tf32 off" if variant == "bad" else "bf16 autocast"}

    def step(self, mark):
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.variant == "good"):
                out = self.model(x)
        with mark("loss"):
            loss = F.mse_loss(out.float(), y)
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
