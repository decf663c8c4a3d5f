"""unfused-gemm-gelu: GELU as a separate kernel after the fc1 GEMM.

bad : F.gelu(F.linear(x, W1, b1), approximate="tanh") -- a cuBLAS GEMM (bias epilogue)
      then a separate GELU element-wise kernel (and gelu_backward in backward).
good: the forward GEMM + bias + GELU in one cuBLASLt call with the GELU epilogue:
      torch._addmm_activation(b1, x, W1.t(), use_gelu=True).  Everything else identical.
      Training needs d gelu / d pre-activation, and cuBLASLt's GELU epilogue does not
      return the pre-activation (PyTorch exposes no GELU_AUX epilogue).  At build time we
      test whether autograd through torch._addmm_activation gives the exact gradient
      (vs. the unfused reference).  If yes, it is used directly ("autograd"); if not
      (or not implemented) a torch.autograd.Function is used whose forward is the fused
      epilogue and whose backward RECOMPUTES the pre-activation with one extra addmm
      (same size as the forward GEMM), then gelu_backward + the two gradient GEMMs
      ("recompute").  The chosen path is recorded in timing.json (scenario_info).
Model: 4 pre-LN MLP blocks (2048 -> 8192 -> 2048, tanh GELU), 8192 tokens, bf16 params,
AdamW(foreach).
"""

import argparse
import contextlib
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, D, FF, DEPTH = 8192, 2048, 8192, 4
POOL = 2


def gelu_linear_unfused(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


class FusedGeluLinearRecompute(torch.autograd.Function):
    """Forward: cuBLASLt GEMM+bias+GELU epilogue.  Backward: exact, recomputes the
    pre-activation with one extra addmm (cost: one more forward-sized GEMM)."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w, b)
        return torch._addmm_activation(b, x, w.t(), use_gelu=True)

    @staticmethod
    def backward(ctx, gy):
        x, w, b = ctx.saved_tensors
        pre = torch.addmm(b, x, w.t())
        gpre = torch.ops.aten.gelu_backward(gy, pre, approximate="tanh")
        return gpre @ w, gpre.t() @ x, gpre.sum(0)


def gelu_linear_fused_autograd(x, w, b):
    return torch._addmm_activation(b, x, w.t(), use_gelu=True)


def gelu_linear_fused_recompute(x, w, b):
    return FusedGeluLinearRecompute.apply(x, w, b)


def check_addmm_activation_autograd(device="cuda"):
    """Does autograd through torch._addmm_activation(use_gelu=True) give the right grads?"""
    torch.manual_seed(3)
    res = {}
    x = torch.randn(256, 512, device=device, dtype=torch.float32, requires_grad=True)
    w = (torch.randn(1024, 512, device=device) / 512 ** 0.5).requires_grad_()
    b = torch.randn(1024, device=device, requires_grad=True)
    gy = torch.randn(256, 1024, device=device)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = gelu_linear_unfused(xd, wd, bd)
    ref.backward(gy.double())
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        y = torch._addmm_activation(b, x, w.t(), use_gelu=True)
        res["fwd_rel_err"] = ((y.double() - ref).norm() / ref.norm()).item()
        res["out_requires_grad"] = bool(y.requires_grad)
        try:
            y.backward(gy)
            for n, t, td in (("x", x, xd), ("w", w, wd), ("b", b, bd)):
                res[f"grad_{n}_rel_err"] = ((t.grad.double() - td.grad).norm() / td.grad.norm()).item()
            res["autograd"] = "ok" if max(res[f"grad_{n}_rel_err"] for n in "xwb") < 1e-3 else "WRONG"
        except Exception as e:  # noqa: BLE001
            res["autograd"] = f"error: {type(e).__name__}: {str(e)[:200]}"
        # the recompute Function
        x.grad = w.grad = b.grad = None
        y2 = FusedGeluLinearRecompute.apply(x, w, b)
        y2.backward(gy)
        res["recompute_grad_rel_err"] = max(((t.grad.double() - td.grad).norm() / td.grad.norm()).item()
                                            for t, td in ((x, xd), (w, wd), (b, bd)))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return res


def epilogue_kernels(device="cuda"):
    """Kernel names launched by one bf16 fused call (evidence the epilogue is used)."""
    x = torch.randn(TOKENS, D, device=device, dtype=torch.bfloat16)
    w = torch.randn(FF, D, device=device, dtype=torch.bfloat16)
    b = torch.randn(FF, device=device, dtype=torch.bfloat16)
    torch._addmm_activation(b, x, w.t(), use_gelu=True)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        torch._addmm_activation(b, x, w.t(), use_gelu=True)
        torch.cuda.synchronize()
    return [e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]


class Block(nn.Module):
    def __init__(self, act_fn):
        super().__init__()
        self.act_fn = act_fn
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)

    def forward(self, x):
        return x + self.fc2(self.act_fn(self.ln(x), self.fc1.weight, self.fc1.bias))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        self.info = {"tokens": TOKENS, "d": D, "ff": FF, "depth": DEPTH}
        if variant == "bad":
            fn = gelu_linear_unfused
            self.info["path"] = "unfused F.gelu(F.linear)"
        else:
            chk = check_addmm_activation_autograd(device)
            self.info["addmm_activation_check"] = chk
            if chk.get("autograd") == "ok":
                fn = gelu_linear_fused_autograd
                self.info["path"] = "torch._addmm_activation (autograd)"
            else:
                fn = gelu_linear_fused_recompute
                self.info["path"] = "FusedGeluLinearRecompute (fused fwd, recompute pre-activation in bwd)"
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = nn.Sequential(*[Block(fn) for _ in range(DEPTH)]).to(dev, torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, TOKENS, D, device=dev, dtype=torch.bfloat16)
        self.py = torch.randn(POOL, TOKENS, D, device=dev, dtype=torch.bfloat16)
        self.i = 0

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
