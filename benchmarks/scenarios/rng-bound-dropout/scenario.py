"""rng-bound-dropout: standalone dropout kernels on large activations.

bad : eager dropout twice per block, on 16.7 M-element activations:
        h = F.dropout(F.relu(fc1(x)), p)          (activation dropout)
        x = x + F.dropout(fc2(h), p)              (residual dropout)
      Each F.dropout is PyTorch's standalone fused_dropout_kernel_vec (Philox random numbers
      + mask, ~2x slower than the memory traffic it does on H100), plus separate relu / add
      kernels in forward and masked-scale kernels in backward.
good: identical model, each dropout fused with its neighbour into one Triton kernel that
      generates the Philox random numbers in-kernel (tl.rand4x(seed, offset): 4 uniforms per
      Philox call, as PyTorch's own kernel does with curand_uniform4):
        triton_fused_relu_dropout_fwd / _bwd      (relu + dropout; mask regenerated in bwd)
        triton_fused_dropout_add_fwd / triton_fused_dropout_bwd
      No mask tensor is stored.  The kernel names follow Inductor's `triton_*fused_<ops>`
      convention (what torch.compile would emit for the same fusion).
      RNG_DROPOUT_IMPL=compile instead uses two small torch.compile'd functions (Inductor
      generates the same kind of fused kernels); earlier measurements (H100, torch 2.11) found
      that path no faster than the hand-written kernels and host-bound at small sizes.
Model: a long-context encoder on 2 sequences x 16384 tokens, d 512: one pre-LN causal
attention layer (8 heads, F.scaled_dot_product_attention, no attention dropout, no bias)
followed by 16 residual MLP blocks (512 -> 512 -> 512, no bias, ReLU) with the two dropouts
above, p = 0.1, bf16 params, AdamW(foreach).  GEMMs ~17 GFLOP each (< 40 us on H100).  The
attention layer is a few long kernels: it keeps the step GPU-bound on the H100 machine's slow
host (~30 us of host time per eager launch, ~40 us per Triton launch through an
autograd.Function), which the 16 MLP blocks alone are not.  On H100 the standalone dropout
kernel runs at memory speed (~34 us per 16.7 M bf16 elements), so it is ~8% of the bad
step's GPU time, not 25%.
"""

import itertools
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, D, HEADS, FF, DEPTH, P = 2, 16384, 512, 8, 512, 16, 0.1
if os.environ.get("SCENARIO_TINY"):
    BATCH, SEQ, D, HEADS, FF, DEPTH = 2, 256, 64, 4, 64, 2
if os.environ.get("SCENARIO_SHAPE") == "check":  # the disjoint check set (docs/validation.md)
    BATCH, SEQ, D, HEADS, FF, DEPTH = 4, 8192, 768, 12, 768, 12
TOKENS = BATCH * SEQ
POOL = 2
IMPL = os.environ.get("RNG_DROPOUT_IMPL", "triton")


def dropout_add_eager(x, h, p: float):
    return x + F.dropout(h, p, training=True)


def relu_dropout_eager(h, p: float):
    return F.dropout(F.relu(h), p, training=True)


# ---------------------------------------------------------------- Triton fused kernels
_BLOCK = 2048  # elements per program (4 chunks of _QB)
_QB = _BLOCK // 4
_kernels = {}
_seed_counter = itertools.count()


def _next_seed():
    # host-side counter: no device sync; offset by torch's initial seed for reproducibility
    return (torch.initial_seed() * 1000003 + next(_seed_counter)) % (2**31 - 1)


try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only environments: the bad variant still runs
    triton = None

if triton is not None:
    # Philox4x32 gives 4 uniforms per call (tl.rand4x); one tl.rand per element made such
    # kernels RNG-compute-bound (~3x slower than the memory floor).  Program pid handles
    # BLOCK = 4 * QB elements as four contiguous chunks of QB; chunk j of element t uses lane
    # j of philox offset pid*QB + t, in forward and (regenerated) in backward.
    @triton.jit
    def _da(X, Hh, OUT, offs, n, p, scale, r):
        m = offs < n
        x = tl.load(X + offs, mask=m, other=0.0).to(tl.float32)
        h = tl.load(Hh + offs, mask=m, other=0.0).to(tl.float32)
        y = x + tl.where(r > p, h * scale, 0.0)
        tl.store(OUT + offs, y.to(OUT.dtype.element_ty), mask=m)

    @triton.jit(do_not_specialize=["seed"])
    def triton_fused_dropout_add_fwd(X, Hh, OUT, n, p, scale, seed, QB: tl.constexpr):
        pid = tl.program_id(0)
        t = tl.arange(0, QB)
        r0, r1, r2, r3 = tl.rand4x(seed, pid * QB + t)
        base = pid * (4 * QB) + t
        _da(X, Hh, OUT, base, n, p, scale, r0)
        _da(X, Hh, OUT, base + QB, n, p, scale, r1)
        _da(X, Hh, OUT, base + 2 * QB, n, p, scale, r2)
        _da(X, Hh, OUT, base + 3 * QB, n, p, scale, r3)

    @triton.jit
    def _db(G, GH, offs, n, p, scale, r):
        m = offs < n
        g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(GH + offs, tl.where(r > p, g * scale, 0.0).to(GH.dtype.element_ty), mask=m)

    @triton.jit(do_not_specialize=["seed"])
    def triton_fused_dropout_bwd(G, GH, n, p, scale, seed, QB: tl.constexpr):
        pid = tl.program_id(0)
        t = tl.arange(0, QB)
        r0, r1, r2, r3 = tl.rand4x(seed, pid * QB + t)
        base = pid * (4 * QB) + t
        _db(G, GH, base, n, p, scale, r0)
        _db(G, GH, base + QB, n, p, scale, r1)
        _db(G, GH, base + 2 * QB, n, p, scale, r2)
        _db(G, GH, base + 3 * QB, n, p, scale, r3)

    @triton.jit
    def _rf(Hh, OUT, offs, n, p, scale, r):
        m = offs < n
        h = tl.load(Hh + offs, mask=m, other=0.0).to(tl.float32)
        y = tl.where((r > p) & (h > 0.0), h * scale, 0.0)
        tl.store(OUT + offs, y.to(OUT.dtype.element_ty), mask=m)

    @triton.jit(do_not_specialize=["seed"])
    def triton_fused_relu_dropout_fwd(Hh, OUT, n, p, scale, seed, QB: tl.constexpr):
        pid = tl.program_id(0)
        t = tl.arange(0, QB)
        r0, r1, r2, r3 = tl.rand4x(seed, pid * QB + t)
        base = pid * (4 * QB) + t
        _rf(Hh, OUT, base, n, p, scale, r0)
        _rf(Hh, OUT, base + QB, n, p, scale, r1)
        _rf(Hh, OUT, base + 2 * QB, n, p, scale, r2)
        _rf(Hh, OUT, base + 3 * QB, n, p, scale, r3)

    @triton.jit
    def _rb(G, Hh, GH, offs, n, p, scale, r):
        m = offs < n
        g = tl.load(G + offs, mask=m, other=0.0).to(tl.float32)
        h = tl.load(Hh + offs, mask=m, other=0.0).to(tl.float32)
        gh = tl.where((r > p) & (h > 0.0), g * scale, 0.0)
        tl.store(GH + offs, gh.to(GH.dtype.element_ty), mask=m)

    @triton.jit(do_not_specialize=["seed"])
    def triton_fused_relu_dropout_bwd(G, Hh, GH, n, p, scale, seed, QB: tl.constexpr):
        pid = tl.program_id(0)
        t = tl.arange(0, QB)
        r0, r1, r2, r3 = tl.rand4x(seed, pid * QB + t)
        base = pid * (4 * QB) + t
        _rb(G, Hh, GH, base, n, p, scale, r0)
        _rb(G, Hh, GH, base + QB, n, p, scale, r1)
        _rb(G, Hh, GH, base + 2 * QB, n, p, scale, r2)
        _rb(G, Hh, GH, base + 3 * QB, n, p, scale, r3)


def _triton_kernels():
    if not _kernels:
        _kernels.update(dropout_add_fwd=triton_fused_dropout_add_fwd, dropout_bwd=triton_fused_dropout_bwd,
                        relu_dropout_fwd=triton_fused_relu_dropout_fwd,
                        relu_dropout_bwd=triton_fused_relu_dropout_bwd, cdiv=triton.cdiv)
    return _kernels


class DropoutAddFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h, p):
        k = _triton_kernels()
        x, h = x.contiguous(), h.contiguous()
        out = torch.empty_like(h)
        n = h.numel()
        seed = _next_seed()
        k["dropout_add_fwd"][(k["cdiv"](n, _BLOCK),)](x, h, out, n, p, 1.0 / (1.0 - p), seed, QB=_QB)
        ctx.p, ctx.seed = p, seed
        return out

    @staticmethod
    def backward(ctx, g):
        k = _triton_kernels()
        g = g.contiguous()
        gh = torch.empty_like(g)
        n = g.numel()
        k["dropout_bwd"][(k["cdiv"](n, _BLOCK),)](g, gh, n, ctx.p, 1.0 / (1.0 - ctx.p), ctx.seed, QB=_QB)
        return g, gh, None


class ReluDropoutFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, p):
        k = _triton_kernels()
        h = h.contiguous()
        out = torch.empty_like(h)
        n = h.numel()
        seed = _next_seed()
        k["relu_dropout_fwd"][(k["cdiv"](n, _BLOCK),)](h, out, n, p, 1.0 / (1.0 - p), seed, QB=_QB)
        ctx.save_for_backward(h)
        ctx.p, ctx.seed = p, seed
        return out

    @staticmethod
    def backward(ctx, g):
        k = _triton_kernels()
        (h,) = ctx.saved_tensors
        g = g.contiguous()
        gh = torch.empty_like(h)
        n = h.numel()
        k["relu_dropout_bwd"][(k["cdiv"](n, _BLOCK),)](g, h, gh, n, ctx.p, 1.0 / (1.0 - ctx.p), ctx.seed,
                                                      QB=_QB)
        return gh, None


def dropout_add_triton(x, h, p: float):
    return DropoutAddFn.apply(x, h, p)


def relu_dropout_triton(h, p: float):
    return ReluDropoutFn.apply(h, p)


_compiled = {}


def fused_fns():
    if IMPL == "compile":
        if not _compiled:
            _compiled["dropout_add"] = torch.compile(dropout_add_eager, dynamic=False, fullgraph=True)
            _compiled["relu_dropout"] = torch.compile(relu_dropout_eager, dynamic=False, fullgraph=True)
        return _compiled["dropout_add"], _compiled["relu_dropout"]
    return dropout_add_triton, relu_dropout_triton


def selfcheck(device="cuda"):
    """Fused kernels vs eager: exact at p=0, mask rate and fwd/bwd mask agreement at p=0.1."""
    torch.manual_seed(2)
    da, rd = dropout_add_triton, relu_dropout_triton
    r = {}
    x = torch.randn(4096, 1000, device=device, requires_grad=True)
    h = torch.randn(4096, 1000, device=device, requires_grad=True)
    g = torch.randn(4096, 1000, device=device)
    # p = 0: must equal eager
    y = rd(h, 0.0)
    y.backward(g)
    hr = h.detach().clone().requires_grad_()
    yr = F.relu(hr)
    yr.backward(g)
    r["relu_p0_fwd_rel"] = ((y - yr).norm() / yr.norm()).item()
    r["relu_p0_bwd_rel"] = ((h.grad - hr.grad).norm() / hr.grad.norm()).item()
    h.grad = None
    y = da(x, h, 0.0)
    r["dropout_add_p0_fwd_rel"] = ((y - (x + h)).norm() / (x + h).norm()).item()
    # p = 0.1: keep rate, scaling, and the backward mask equals the forward mask
    y = da(x, h, 0.1)
    y.backward(g)
    kept = (y - x).abs() > 1e-6
    r["dropout_add_keep_rate"] = kept.float().mean().item()
    r["dropout_add_scale_err"] = ((y - x)[kept] - (h / 0.9)[kept]).abs().max().item()
    r["dropout_add_bwd_mask_agree"] = ((h.grad != 0) == kept).float().mean().item()
    r["dropout_add_gx_is_g"] = bool(torch.equal(x.grad, g))
    h.grad = None
    y = rd(h, 0.1)
    y.backward(g)
    kept = y != 0
    r["relu_dropout_keep_rate_of_positive"] = (kept.float().sum() / (h > 0).float().sum()).item()
    r["relu_dropout_bwd_mask_agree"] = ((h.grad != 0) == kept).float().mean().item()
    y2 = rd(h, 0.1)
    r["fresh_mask_each_call"] = bool(((y2 != 0) != kept).any().item())
    return r


class Block(nn.Module):
    def __init__(self, fused):
        super().__init__()
        if fused:
            self.dropout_add, self.relu_dropout = fused_fns()
        else:
            self.dropout_add, self.relu_dropout = dropout_add_eager, relu_dropout_eager
        self.fc1 = nn.Linear(D, FF, bias=False)
        self.fc2 = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        h = self.relu_dropout(self.fc1(x), P)
        return self.dropout_add(x, self.fc2(h), P)


class Attention(nn.Module):
    """Pre-LN causal self-attention through SDPA (no dropout), no bias."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.ln(x)
        q, k, v = (m(h).view(b, s, HEADS, D // HEADS).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(a.transpose(1, 2).reshape(b, s, D))


class Scenario:
    def __init__(self, variant, device):
        if variant not in ("bad", "good"):
            raise ValueError(variant)
        torch.manual_seed(0)
        dev = torch.device(device)
        self.variant = variant
        self.model = nn.Sequential(Attention(), *[Block(variant == "good") for _ in range(DEPTH)]).to(
            dev, torch.bfloat16)
        self.model.train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        self.px = torch.randn(POOL, BATCH, SEQ, D, device=dev, dtype=torch.bfloat16)
        self.py = torch.randn(POOL, BATCH, SEQ, D, device=dev)
        self.i = 0
        self.info = {"batch": BATCH, "seq": SEQ, "d": D, "heads": HEADS, "ff": FF, "mlp_blocks": DEPTH, "p": P,
                     "dropout": (f"fused ({IMPL})" if variant == "good" else "eager standalone")}

    def step(self, mark):
        with mark("data"):
            j = self.i % POOL
            self.i += 1
            x, y = self.px[j], self.py[j]
        with mark("forward"):
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

    standalone(build, device_flag=True)
