"""Check advisor's efficiency model against measured GEMMs on the GPU (issue 38, "How it is checked").

For each GEMM at a known shape and datatype, two measurements of the same work:

* ``torch.utils.benchmark`` times ``torch.mm`` (no profiler): measured TFLOP/s = 2*M*N*K / time;
* torch.profiler (``record_shapes=True``) records the same GEMMs into a Kineto trace under
  ``--out``; advisor reads it (`advisor.ingest`), and its efficiency model
  (`advisor.engine.efficiency.kernel_efficiency`) gives FLOPs from the operator's shapes and
  achieved TFLOP/s from the kernels' time.

The table prints both, their difference (the issue's bar: within 10%), and the datatype's peak
on this GPU as advisor reads it. Then nanoGPT's vocabulary case: one training step of the logits
GEMMs (forward, and the two backward GEMMs) at 50257 and 50304 tokens, timed both ways, with
gemm-shape-alignment's model of the unpadded step after the fix: the unaligned GEMMs' padded
FLOPs at the achieved TFLOP/s of the aligned ones (here: the padded run's, from its trace).

Run on the H100 from the repository root (about a minute; advisor needs only the standard
library to read the traces, so the checkout is imported directly)::

    python3 benchmarks/gemm_efficiency.py --out $OUT/eff

Writes ``--out``/trace_<case>.json (one Kineto trace per case) and results.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.utils.benchmark as tb  # noqa: E402

from advisor.engine.efficiency import KernelEfficiency, kernel_efficiency  # noqa: E402
from advisor.engine.gpus import lookup  # noqa: E402
from advisor.ingest.base import load_trace  # noqa: E402
from rules.gemm_shape_alignment import padded_flops, unaligned  # noqa: E402

TOKENS = 12 * 1024  # nanoGPT's B*T at batch 12, block 1024
CASES: list[tuple[str, int, int, int, str]] = [
    # name, M, K, N, dtype ("tf32": float32 with TF32 allowed)
    ("4096^3 bf16", 4096, 4096, 4096, "bf16"),
    ("4096^3 fp16", 4096, 4096, 4096, "fp16"),
    ("4096^3 tf32", 4096, 4096, 4096, "tf32"),
    ("4096^3 fp32", 4096, 4096, 4096, "fp32"),
    ("8192x8192x1024 bf16", 8192, 1024, 8192, "bf16"),
    ("vocab 50257 bf16", TOKENS, 768, 50257, "bf16"),
    ("vocab 50304 bf16", TOKENS, 768, 50304, "bf16"),
    ("vocab 50257 fp32", TOKENS, 768, 50257, "fp32"),
]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
          "fp32": torch.float32}


DEVICE = "cuda"  # --device cpu: a smoke test of the script's own code without a GPU


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def operands(m: int, k: int, n: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    t = DTYPES[dtype]
    return (torch.randn(m, k, device=DEVICE, dtype=t), torch.randn(k, n, device=DEVICE, dtype=t))


def timed(fn, min_run_time: float) -> float:
    """Median seconds per call, no profiler. torch.utils.benchmark synchronizes CUDA around each
    block of calls, not after every call (a sync per call would add its latency to each GEMM)."""
    fn()
    sync()
    return tb.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(
        min_run_time=min_run_time).median


def profiled(fn, path: Path, reps: int) -> None:
    """``reps`` calls under torch.profiler with shapes, exported as a Kineto trace."""
    fn()
    sync()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA],
                                record_shapes=True) as prof:
        for _ in range(reps):
            fn()
        sync()
    prof.export_chrome_trace(str(path))


def advisor_gemms(path: Path) -> list[KernelEfficiency]:
    """advisor's GEMM entries of a trace (all its kernels: a benchmark has no steps)."""
    g = load_trace(path)
    gpu = g.info.gpus[0] if g.info.gpus else None
    spec = lookup(gpu.name, gpu.compute_capability) if gpu else None
    return [k for k in kernel_efficiency(g, list(g.kernels()), spec) if k.category == "gemm"]


def vocab_step(vocab: int):
    """One training step of the logits GEMMs: y = x @ W^T forward, dX and dW backward."""
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(TOKENS, 768, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(vocab, 768, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(TOKENS, vocab, device=DEVICE, dtype=torch.bfloat16)

    def step() -> None:
        x.grad = w.grad = None
        torch.nn.functional.linear(x, w).backward(grad)
    return step


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--min-run-time", type=float, default=0.5, help="seconds per timing")
    ap.add_argument("--reps", type=int, default=10, help="profiled calls per case")
    ap.add_argument("--device", default="cuda", help="cpu: smoke-test the script (no kernels)")
    ap.add_argument("--rows", type=int, default=0, help="override M (a small smoke test)")
    args = ap.parse_args()
    global DEVICE, TOKENS, CASES
    DEVICE = args.device
    if args.rows:
        TOKENS = args.rows
        CASES = [(c, args.rows, k, n, d) for c, _, k, n, d in CASES]
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    print(f"GPU: {gpu}; torch {torch.__version__}")
    rows, results = [], {"gpu": gpu, "torch": torch.__version__,
                         "cases": [], "vocab_step": {}}
    header = f"{'shape':22} {'dtype':5} {'bench TF/s':>10} {'advisor TF/s':>12} {'diff':>7} " \
             f"{'peak':>6} {'kernel':.28}"
    for name, m, k, n, dtype in CASES:
        a, b = operands(m, k, n, dtype)
        sec = timed(lambda a=a, b=b: torch.mm(a, b), args.min_run_time)
        measured = 2.0 * m * n * k / sec / 1e12
        path = args.out / f"trace_{re.sub(r'[^0-9a-z]+', '_', name)}.json"
        profiled(lambda a=a, b=b: torch.mm(a, b), path, args.reps)
        gemms = [g for g in advisor_gemms(path) if g.sizes == (1, m, k, n)]
        got = gemms[0] if gemms else None
        tf = got.tflops if got else None
        diff = (tf / measured - 1) if tf else None
        rows.append(f"{name:22} {dtype:5} {measured:10.1f} "
                    f"{(f'{tf:.1f}' if tf else 'n/a'):>12} "
                    f"{(f'{diff:+.1%}' if diff is not None else 'n/a'):>7} "
                    f"{(got.peak_tflops if got and got.peak_tflops else 0):6.0f} "
                    f"{(got.kernel if got else '')[:28]}")
        results["cases"].append({"case": name, "dtype": dtype, "m": m, "k": k, "n": n,
                                 "bench_tflops": measured, "advisor_tflops": tf,
                                 "advisor_precision": got.precision if got else None,
                                 "advisor_of_roof": got.of_roof if got else None,
                                 "kernel": got.kernel if got else None, "trace": path.name})
        del a, b
    print(header)
    print("\n".join(rows))

    step = {}
    for vocab in (50257, 50304):
        fn = vocab_step(vocab)
        step[vocab] = timed(fn, args.min_run_time)
        profiled(fn, args.out / f"trace_vocab_step_{vocab}.json", args.reps)
    aligned = advisor_gemms(args.out / "trace_vocab_step_50304.json")
    rate = sum(g.flops or 0 for g in aligned) / max(sum(g.time_ns for g in aligned), 1)  # FLOP/ns
    rate = rate or float("nan")  # no kernels (--device cpu)
    plain = advisor_gemms(args.out / "trace_vocab_step_50257.json")
    off = [g for g in plain if unaligned(g)]
    now_ns = sum(g.time_ns for g in plain) / args.reps
    fixed_ns = (sum(g.time_ns for g in plain if not unaligned(g))
                + sum(padded_flops(g) / rate for g in off)) / args.reps
    print(f"\nnanoGPT logits GEMMs, one training step ({TOKENS} tokens x 768, bf16, no profiler):")
    print(f"  vocab 50257: {step[50257] * 1e3:.3f} ms   vocab 50304: {step[50304] * 1e3:.3f} ms "
          f"-> measured {step[50257] / step[50304]:.2f}x from padding")
    print(f"  advisor (trace of 50257, {len(off)} unaligned GEMM shapes): GEMMs {now_ns / 1e6:.3f} ms"
          f" -> {fixed_ns / 1e6:.3f} ms at the aligned GEMMs' {rate / 1e3:.0f} TFLOP/s: "
          f"estimated {now_ns / fixed_ns if fixed_ns else float('nan'):.2f}x")
    results["vocab_step"] = {"step_ms_50257": step[50257] * 1e3, "step_ms_50304": step[50304] * 1e3,
                             "advisor_gemm_ms_50257": now_ns / 1e6,
                             "advisor_fixed_gemm_ms": fixed_ns / 1e6,
                             "aligned_tflops": rate / 1e3}
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
