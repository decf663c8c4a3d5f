"""uncaptured-cuda-graph: a launch-bound training step left uncaptured.

bad : deep narrow MLP (40 x [Linear(512,512) + ReLU], batch 256, fp32), MSE loss, Adam:
      hundreds of few-microsecond kernels per step, the GPU idles between launches.
good: the identical step captured once with torch.cuda.CUDAGraph (static input/target
      buffers, Adam(capturable=True)) and replayed.  Marks: "data", "graph_replay".
good-bf16: good with the forward and loss under torch.autocast(bfloat16) inside the captured
      graph: fp32-matmul's fix timed on the graphed step, where the rule raises it (the
      healthy-trace findings, docs/validation.md). Not a captured fixture.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, WIDTH, DEPTH = 256, 512, 40
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    BATCH, WIDTH, DEPTH = 128, 768, 24
POOL = 8
VARIANTS = ("bad", "good", "good-bf16")


def make_model():
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    layers.append(nn.Linear(WIDTH, WIDTH))
    return nn.Sequential(*layers)


class Scenario:
    def __init__(self, variant, device):
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = make_model().to(dev)
        self.px = torch.randn(POOL, BATCH, WIDTH, device=dev)
        self.py = torch.randn(POOL, BATCH, WIDTH, device=dev)
        self.x = torch.empty(BATCH, WIDTH, device=dev)
        self.y = torch.empty(BATCH, WIDTH, device=dev)
        self.i = 0
        self.info = {"batch": BATCH, "width": WIDTH, "depth": DEPTH}
        if variant == "bad":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        elif variant in ("good", "good-bf16"):
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, capturable=True)
            self._capture()
        else:
            raise ValueError(variant)

    def _load(self):
        j = self.i % POOL
        self.i += 1
        self.x.copy_(self.px[j], non_blocking=True)
        self.y.copy_(self.py[j], non_blocking=True)

    def _body(self):
        # cache_enabled=False: autocast's weight-cast cache must not outlive a graph capture
        # (PyTorch's CUDA graphs notes)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False,
                            enabled=self.variant == "good-bf16"):
            loss = F.mse_loss(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def _capture(self):
        self._load()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._body()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._body()
        torch.cuda.synchronize()

    def step(self, mark):
        with mark("data"):
            self._load()
        if self.variant != "bad":
            with mark("graph_replay"):
                self.graph.replay()
            return
        with mark("forward"):
            out = self.model(self.x)
        with mark("loss"):
            loss = F.mse_loss(out, self.y)
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

    standalone(build, variants=VARIANTS)
