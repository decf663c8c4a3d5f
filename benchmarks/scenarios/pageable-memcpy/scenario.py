"""pageable-memcpy: a large batch copied each step from pageable host memory.

bad : each step the batch (16384 x 1024 fp32 = 64 MiB, plus int64 labels) comes as a
      pageable host tensor and is moved with a blocking `.cuda()`: a staged, synchronous
      copy on the compute stream, no overlap with compute, host blocked.
good: the host batches live in pinned memory (what DataLoader(pin_memory=True)'s pin
      thread hands over), are copied with non_blocking=True on a side stream one step
      ahead (prefetch), the compute stream waits on an event, and record_stream() tells
      the caching allocator the tensor is used on the compute stream.
Model: 2 x MLP blocks (1024 -> 4096 -> 1024, GELU, residual) + classifier (1000),
bf16 autocast, AdamW.  Two alternating host batches, same in both variants.
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

TOKENS, D, FF, NCLS = 16384, 1024, 4096, 1000
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    TOKENS, D, FF = 32768, 512, 2048
NHOST = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.ModuleList(nn.Linear(D, FF) for _ in range(2))
        self.fc2 = nn.ModuleList(nn.Linear(FF, D) for _ in range(2))
        self.head = nn.Linear(D, NCLS)

    def forward(self, x):
        for a, b in zip(self.fc1, self.fc2):
            x = x + b(gelu_linear(a, x))
        return self.head(x)


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        self.dev = torch.device(device)
        self.variant = variant
        self.model = Net().to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        hx = [torch.randn(TOKENS, D) for _ in range(NHOST)]
        hy = [torch.randint(0, NCLS, (TOKENS,)) for _ in range(NHOST)]
        if variant == "good":
            hx = [t.pin_memory() for t in hx]
            hy = [t.pin_memory() for t in hy]
            self.copy_stream = torch.cuda.Stream()
        self.hx, self.hy = hx, hy
        self.i = 0
        self.next = None
        self.info = {"batch_mib": TOKENS * D * 4 / 2**20, "host_memory": "pinned" if variant == "good" else "pageable"}

    def _issue(self, j):
        with torch.cuda.stream(self.copy_stream):
            x = self.hx[j % NHOST].to(self.dev, non_blocking=True)
            y = self.hy[j % NHOST].to(self.dev, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self.copy_stream)
        return x, y, ev

    def step(self, mark):
        with mark("data"):
            if self.variant == "bad":
                x = self.hx[self.i % NHOST].cuda()
                y = self.hy[self.i % NHOST].cuda()
            else:
                if self.next is None:
                    self.next = self._issue(self.i)
                x, y, ev = self.next
                cur = torch.cuda.current_stream()
                cur.wait_event(ev)
                x.record_stream(cur)
                y.record_stream(cur)
                self.next = self._issue(self.i + 1)  # prefetch next batch, overlaps compute
            self.i += 1
        with mark("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
            logits = self.model(x)
        with mark("loss"):
            loss = F.cross_entropy(logits.float(), y)
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
