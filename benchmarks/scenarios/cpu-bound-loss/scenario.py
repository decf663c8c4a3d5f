"""cpu-bound-loss: a detection-style loss computed per sample in Python with host syncs.

bad : per-sample loop over the batch; each sample does `.item()` on its positive count, a
      data-dependent branch and boolean-mask indexing (another sync), so after the forward
      pass the GPU idles while the host walks the batch and launches tiny kernels one by
      one (and again for their backward).
good: the same loss vectorised with masks (no host syncs), AND the whole step (forward,
      loss, backward, Adam(capturable=True)) captured once in a CUDA graph with static
      input buffers, as in the MLPerf Mask R-CNN submission (+30% there).
      Marks in good: "data" (copy into the static buffers) and "graph_replay".
Model: a per-anchor backbone of 32 residual MLP blocks x + W2 relu(W1 x) (d 512 -> 1024 ->
512, no bias) on 16 images x 1024 anchors = 16384 tokens (input 64 features), class (9)
and box (4) heads; bf16 params, loss in fp32.  GEMMs ~17 GFLOP each (< 40 us on H100),
forward+backward ~9 ms of GPU time, kernels mostly >= 20 us.  Same data, same math.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

B, A, FIN, D, FF, DEPTH, C = 16, 1024, 64, 512, 1024, 32, 8  # C fg classes + background (0)
B, A, FIN, D, FF, DEPTH = {"tiny": (4, 64, 16, 32, 64, 2), "check": (8, 2048, 64, 768, 1536, 24)}.get(  # check set
    "tiny" if os.environ.get("SCENARIO_TINY") else os.environ.get("SCENARIO_SHAPE"), (B, A, FIN, D, FF, DEPTH))
POOL = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, FF, bias=False)
        self.fc2 = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        return x + self.fc2(F.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FIN, D)
        self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
        self.cls = nn.Linear(D, C + 1)
        self.box = nn.Linear(D, 4)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        # heads in bf16, predictions handed to the loss in fp32
        return self.cls(h).float(), self.box(h).float()


def loss_loop(cls_p, box_p, cls_t, box_t):
    """Per-sample loop with host round trips (the anti-pattern)."""
    total = cls_p.new_zeros(())
    for i in range(cls_p.shape[0]):
        pos = cls_t[i] > 0
        npos = int(pos.sum().item())  # host sync per sample
        cls_l = F.cross_entropy(cls_p[i], cls_t[i], reduction="sum") / max(npos, 1)
        if npos > 0:  # data-dependent branch
            box_l = F.smooth_l1_loss(box_p[i][pos], box_t[i][pos], beta=1 / 9, reduction="sum") / npos
        else:
            box_l = box_p[i].sum() * 0.0
        total = total + cls_l + box_l
    return total / cls_p.shape[0]


def loss_vec(cls_p, box_p, cls_t, box_t):
    """Same value, no host syncs."""
    pos = (cls_t > 0).float()
    npos = pos.sum(1).clamp(min=1.0)
    cls_l = F.cross_entropy(cls_p.reshape(-1, C + 1), cls_t.reshape(-1), reduction="none").view(B, A).sum(1)
    box_l = (F.smooth_l1_loss(box_p, box_t, beta=1 / 9, reduction="none").sum(-1) * pos).sum(1)
    return ((cls_l + box_l) / npos).mean()


class Scenario:
    def __init__(self, variant, device):
        torch.manual_seed(0)
        self.variant = variant
        dev = torch.device(device)
        self.model = Net().to(dev, torch.bfloat16)
        # data pool on device: ~25% of images have no objects
        self.px = torch.randn(POOL, B, A, FIN, device=dev, dtype=torch.bfloat16)
        cls = torch.randint(1, C + 1, (POOL, B, A), device=dev)
        keep = torch.rand(POOL, B, A, device=dev) < 0.05
        has_obj = (torch.rand(POOL, B, 1, device=dev) > 0.25)
        self.pcls = torch.where(keep & has_obj, cls, torch.zeros_like(cls))
        self.pbox = torch.randn(POOL, B, A, 4, device=dev)
        self.x = torch.empty(B, A, FIN, device=dev, dtype=torch.bfloat16)
        self.cls_t = torch.empty(B, A, dtype=torch.long, device=dev)
        self.box_t = torch.empty(B, A, 4, device=dev)
        self.i = 0
        self.info = {"batch": B, "anchors": A, "d": D, "ff": FF, "depth": DEPTH, "dtype": "bf16 params, fp32 loss",
                     "loss": "per-sample loop" if variant == "bad" else "vectorised+cuda graph"}
        if variant == "bad":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        elif variant == "good":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, capturable=True)
            self._capture()
        else:
            raise ValueError(variant)

    def _load(self):
        j = self.i % POOL
        self.i += 1
        self.x.copy_(self.px[j], non_blocking=True)
        self.cls_t.copy_(self.pcls[j], non_blocking=True)
        self.box_t.copy_(self.pbox[j], non_blocking=True)

    def _fwd_bwd_opt(self):
        cls_p, box_p = self.model(self.x)
        loss = loss_vec(cls_p, box_p, self.cls_t, self.box_t)
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
                self._fwd_bwd_opt()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._fwd_bwd_opt()
        torch.cuda.synchronize()

    def step(self, mark):
        if self.variant == "good":
            with mark("data"):
                self._load()
            with mark("graph_replay"):
                self.graph.replay()
            return
        with mark("data"):
            self._load()
        with mark("forward"):
            cls_p, box_p = self.model(self.x)
        with mark("loss"):
            loss = loss_loop(cls_p, box_p, self.cls_t, self.box_t)
        with mark("backward"):
            loss.backward()
        with mark("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


def build(variant: str, device: str = "cuda"):
    return Scenario(variant, device)


def selfcheck(device="cuda"):
    torch.manual_seed(1)
    cls_p = torch.randn(B, A, C + 1, device=device, dtype=torch.float64)
    box_p = torch.randn(B, A, 4, device=device, dtype=torch.float64)
    cls_t = torch.where(torch.rand(B, A, device=device) < 0.05, torch.randint(1, C + 1, (B, A), device=device), 0)
    cls_t[:5] = 0
    box_t = torch.randn(B, A, 4, device=device, dtype=torch.float64)
    a, b = loss_loop(cls_p, box_p, cls_t, box_t), loss_vec(cls_p, box_p, cls_t, box_t)
    return {"loop": a.item(), "vec": b.item(), "rel_err": abs(a.item() - b.item()) / abs(a.item())}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness import standalone  # the timing loop every scenario shares

    standalone(build, device_flag=True)
