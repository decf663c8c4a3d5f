"""The scenarios' GEMM+GELU site, and unfused-gemm-gelu's fix applied to it.

Every scenario whose MLP runs ``GELU(fc1(x))`` calls `gelu_linear` (the site); by default it is
the eager ``F.gelu(fc(x))`` the fixtures were captured with (the same two ops: the traces do not
change). ``harness.py --fix gelu-epilogue`` swaps the site for `fused_gelu_linear`, which is what
the rule's fix does in Transformer Engine (``te.LayerNormMLP``/``te.Linear`` with GELU): one
cuBLASLt GEMM with the ``GELU_AUX_BIAS`` epilogue writes the activation and keeps the
pre-activation for the backward pass, so the forward GELU kernel (a read and a write of the whole
activation, and a launch) is gone. Transformer Engine itself cannot be installed on the device
(its PyPI torch extension is a source build; the core wheel alone is 729 MB, over the 64 MiB a
device call carries), so the epilogue is called directly: `gelu_epilogue.cu`, built with nvcc
at first use and called through ctypes.

What the fix leaves as it was, as the rule prices it (forward GELU kernels removed, the backward
untouched): the backward runs ``gelu_backward`` on the kept pre-activation as its own kernel, then
the two GEMMs and the bias reduction of ``nn.Linear``'s backward. (Transformer Engine goes further
and folds the dGELU into fc2's data-gradient GEMM, a saving the rule does not claim.) cuBLASLt's
GELU is the tanh approximation; the backward uses the same one.

    python3 gelu_epilogue.py --check     # on a GPU: build, errors against eager, kernel times
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

SOURCE = Path(__file__).with_name("gelu_epilogue.cu")
WORKSPACE_BYTES = 32 * 2**20
"""cuBLASLt workspace: 32 MiB, what torch gives its own cuBLASLt calls on Hopper."""


def eager(fc: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The site as captured: the GEMM (``addmm`` with its bias epilogue), then a GELU kernel."""
    return F.gelu(fc(x))


_impl = eager


def gelu_linear(fc: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``GELU(fc(x))`` through whichever implementation `use` chose."""
    return _impl(fc, x)


def use(fused: bool) -> None:
    """Route every scenario's GEMM+GELU site through the epilogue (True) or eager (False); in
    one process the harness's ``ab`` mode alternates the two."""
    global _impl
    _impl = fused_gelu_linear if fused else eager


def _loaded_cublaslt() -> str | None:
    """The libcublasLt torch has loaded: the extension links that one, so the process holds one
    cuBLASLt (a toolkit's other copy would be a second library with its own heuristics)."""
    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if line.split() else ""
            if "libcublasLt.so" in path:
                return path
    return None


_lib = None


def library() -> ctypes.CDLL:
    """Build `gelu_epilogue.cu` once per source (cached by its hash under the temp folder) and
    load it."""
    global _lib
    if _lib is not None:
        return _lib
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(os.environ.get("GELU_EPILOGUE_CACHE", tempfile.gettempdir())) / f"gelu_epilogue_{digest}.so"
    if not out.exists():
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        lt = _loaded_cublaslt()
        link = [f"-Xlinker={lt}", f"-Xlinker=-rpath={os.path.dirname(lt)}"] if lt else ["-lcublasLt"]
        tmp = out.with_suffix(f".{os.getpid()}.so")
        subprocess.run([nvcc, "-O2", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-o", str(tmp),
                        str(SOURCE), *link], check=True)
        tmp.replace(out)
    lib = ctypes.CDLL(str(out))
    lib.gelu_aux_gemm.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 6 + [
        ctypes.c_size_t, ctypes.c_void_p]
    lib.gelu_aux_gemm.restype = ctypes.c_int
    _lib = lib
    return lib


_workspaces: dict[torch.device, torch.Tensor] = {}


def _workspace(device: torch.device) -> torch.Tensor:
    if device not in _workspaces:
        _workspaces[device] = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _workspaces[device]


fused_calls = 0
"""How many epilogue GEMMs ran: the harness checks it after a fixed warm-up, so a step the fix
does not reach (fp32 outside autocast) is never timed as if it had been applied. Counted here,
where the GEMM is launched, in eager and in a compiled graph alike (the site's own Python does
not run in a compiled graph, and Dynamo would guard on a global it increments)."""


def gemm_gelu_aux(x2: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(gelu(x2 @ w^T + b), x2 @ w^T + b) from one cuBLASLt GEMM; bf16, contiguous."""
    global fused_calls
    fused_calls += 1
    m, k = x2.shape
    n = w.shape[0]
    y = torch.empty(m, n, device=x2.device, dtype=torch.bfloat16)
    aux = torch.empty_like(y)
    rc = library().gelu_aux_gemm(
        m, n, k, x2.data_ptr(), w.data_ptr(), None if b is None else b.data_ptr(), y.data_ptr(),
        aux.data_ptr(), _workspace(x2.device).data_ptr(), WORKSPACE_BYTES,
        torch.cuda.current_stream(x2.device).cuda_stream)
    if rc != 0:
        raise RuntimeError(f"gelu_aux_gemm failed ({rc}) for m={m} n={n} k={k}")
    return y, aux


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """cuBLASLt's heuristic assumes 256-byte aligned operands (its default preference)."""
    t = t.contiguous()
    return t if t.data_ptr() % 256 == 0 else t.clone()


@torch.library.custom_op("advisor_bench::gemm_gelu_aux", mutates_args=(), device_types="cuda")
def gemm_gelu_aux_op(x2: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The epilogue GEMM as a torch operator: eager calls it, and ``torch.compile`` keeps it as
    an extern kernel (a ctypes call inside a plain function would break the graph there)."""
    return gemm_gelu_aux(_aligned(x2), _aligned(w), None if b is None else _aligned(b))


@gemm_gelu_aux_op.register_fake
def _(x2, w, b):
    shape = (x2.shape[0], w.shape[0])
    return x2.new_empty(shape), x2.new_empty(shape)


def _setup_context(ctx, inputs, output):
    x2, w, b = inputs
    ctx.save_for_backward(x2, w, output[1])
    ctx.has_bias = b is not None


def _backward(ctx, gy, _gaux=None):
    """The rest of the step as eager runs it: dGELU as its own kernel (on the kept
    pre-activation), then nn.Linear's two GEMMs and its bias reduction."""
    x2, w, aux = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad
    dz = torch.ops.aten.gelu_backward(gy, aux, approximate="tanh")
    # a gradient nobody needs is not computed, as eager's addmm backward skips it (the first
    # layer's input, data, needs none: wave 12's first runs paid that GEMM, 0.17 ms a step)
    return (dz @ w if need_x else None, dz.t() @ x2 if need_w else None,
            dz.sum(0) if need_b and ctx.has_bias else None)


gemm_gelu_aux_op.register_autograd(_backward, setup_context=_setup_context)


class _GemmGeluAuxFn(torch.autograd.Function):
    """The same operator and backward for eager steps, without the custom operator's dispatch:
    its Python path (autograd wrapper, redispatch, Dynamo's disable guard) cost about 0.2 ms of
    host time a call on the device (wave 12's first run: the host-bound steps paid it), far above
    a Linear's; Transformer Engine's own modules are autograd Functions too."""

    @staticmethod
    def forward(ctx, x2, w, b):
        y, aux = gemm_gelu_aux(_aligned(x2), _aligned(w), None if b is None else _aligned(b))
        _setup_context(ctx, (x2, w, b), (y, aux))
        return y

    @staticmethod
    def backward(ctx, gy):
        return _backward(ctx, gy)


def fused_gelu_linear(fc: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The site with unfused-gemm-gelu's fix: GELU in the GEMM's epilogue, in bf16: under bf16
    autocast (the operands cast as autocast casts a Linear's) or on a bf16 model. Anything else
    (fp32 outside autocast, the CPU) runs the eager site: the fix is a CUDA bf16 one."""
    if not x.is_cuda:
        return eager(fc, x)
    if torch.is_autocast_enabled("cuda"):
        if torch.get_autocast_dtype("cuda") != torch.bfloat16:
            return eager(fc, x)
        dt = torch.bfloat16
        x, w, b = x.to(dt), fc.weight.to(dt), None if fc.bias is None else fc.bias.to(dt)
    elif x.dtype == fc.weight.dtype == torch.bfloat16:
        w, b = fc.weight, fc.bias
    else:
        return eager(fc, x)
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    # under torch.compile the operator (an extern kernel to Inductor), in eager the Function
    fused = (lambda *a: gemm_gelu_aux_op(*a)[0]) if torch.compiler.is_compiling() else _GemmGeluAuxFn.apply
    y = fused(x2, w, b)
    return y.view(*shape[:-1], fc.out_features)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def _graph_ms(fn, reps: int) -> float:
    """GPU time of one ``fn()``: ``reps`` calls captured in a CUDA graph, replayed 5 times, the
    fastest replay over ``reps`` (no host launch cost in it: a host-bound loop of calls would
    time the launches, as wave 12's first check did)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    del graph
    return best


def kernel_times(x: torch.Tensor, fc: torch.nn.Linear, reps: int) -> dict:
    """The forward at one shape on the GPU alone: the bias GEMM as eager runs it (``addmm``,
    cuBLASLt's bias epilogue), the GELU kernel over its output, and the GELU_AUX_BIAS GEMM."""
    x16, w16, b16 = (t.detach().to(torch.bfloat16) for t in (x, fc.weight, fc.bias))
    z = torch.addmm(b16, x16, w16.t())
    out = {
        "gemm_bias_ms": _graph_ms(lambda: torch.addmm(b16, x16, w16.t()), reps),
        "gelu_ms": _graph_ms(lambda: F.gelu(z), reps),
        "fused_ms": _graph_ms(lambda: gemm_gelu_aux(x16, w16, b16), reps),
    }
    out["eager_ms"] = out["gemm_bias_ms"] + out["gelu_ms"]
    out["gpu_saving_ms"] = out["eager_ms"] - out["fused_ms"]
    out["gpu_saving_share_of_gelu"] = out["gpu_saving_ms"] / out["gelu_ms"]
    return {k: round(v, 4) for k, v in out.items()}


def host_times(x: torch.Tensor, fc: torch.nn.Linear, reps: int) -> dict:
    """Host time per call of the site in a training forward (grad on, under autocast), eager
    against fused: what a host-bound step pays for the fix's Python path."""
    out = {}
    for name, fn in (("eager", eager), ("fused", fused_gelu_linear)):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for _ in range(5):
                fn(fc, x)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn(fc, x)
            out[f"{name}_host_us"] = round((time.perf_counter() - t0) / reps * 1e6, 1)
        torch.cuda.synchronize()
    return out


def check(shapes: list[tuple[int, int, int]], reps: int = 20) -> list[dict]:
    """For each (tokens, d_in, d_out): the fused site's errors against eager bf16 (forward,
    the three gradients; tanh and erf GELU), the forward's GPU time against eager's two kernels
    (`kernel_times`) and the site's host time per call in training (`host_times`)."""
    rows = []
    for m, k, n in shapes:
        torch.manual_seed(0)
        fc = torch.nn.Linear(k, n, device="cuda")
        x = torch.randn(m, k, device="cuda", requires_grad=True)
        gy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        row: dict = {"tokens": m, "d_in": k, "d_out": n}
        grads = {}
        for name, fn in (("fused", fused_gelu_linear),
                         ("tanh", lambda f, t: F.gelu(f(t), approximate="tanh")),
                         ("erf", eager)):
            x.grad = fc.weight.grad = fc.bias.grad = None
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = fn(fc, x)
            y.backward(gy)
            grads[name] = (y.detach(), x.grad.clone(), fc.weight.grad.clone(), fc.bias.grad.clone())
        for ref in ("tanh", "erf"):
            row[f"rel_err_vs_{ref}"] = {part: round(_rel(a, b), 5) for part, a, b in zip(
                ("y", "dx", "dw", "db"), grads["fused"], grads[ref])}
        row.update(kernel_times(x.detach(), fc, reps))
        row.update(host_times(x.detach().requires_grad_(), fc, reps))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="errors and kernel times on this GPU")
    ap.add_argument("--shape", action="append", default=[],
                    help="TOKENS,D_IN,D_OUT (repeatable); default: the fixed scenarios' fc1 shapes")
    ap.add_argument("--out", help="write the rows here as JSON")
    args = ap.parse_args()
    if not args.check:
        ap.error("nothing to do: --check")
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] or [
        (16384, 768, 3072), (8192, 1024, 4096), (16384, 1024, 4096), (32768, 512, 2048),
        (8192, 2048, 8192), (8192, 1024, 4096), (8192, 768, 3072)]
    rows = check(shapes)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
