"""Check advisor's efficiency model against measured GEMMs on the GPU (issue 38, "How it is checked").

For each GEMM at a known shape and datatype, in one process and back to back, ``--rounds``
times (after a warm-up that brings the clocks up and settles cuBLAS's kernel choice):

* ``torch.utils.benchmark`` times ``torch.mm`` without a profiler: its per-call time (the
  median of its blocks) gives the benchmark's TFLOP/s = 2*M*N*K / time;
* the same loop, as many calls as the benchmark's timed blocks took about ``--min-run-time``,
  runs under torch.profiler (``record_shapes=True``) between two CUDA events; advisor reads the
  exported Kineto trace (`advisor.ingest`) and its efficiency model
  (`advisor.engine.efficiency.kernel_efficiency`) gives FLOPs from the operator's shapes and
  achieved TFLOP/s from the kernels' time.

Why both, and both ways: a short GEMM (4096^3 in 16 bits, ~0.2 ms) is timed differently by
the two. The benchmark's per-call time includes the gap between kernels; advisor's is the
kernels' own time. And the GPU's clocks move: a long benchmark at full power can run at a lower
SM clock than a short profiled burst (the first version of this script, 10 profiled calls after
0.5 s of benchmark, read +13% and -19% on the two 16-bit 4096^3 GEMMs). So each round reports
the benchmark's per call, the profiled loop's per call (CUDA events: the same loop with the
profiler on), the median single kernel, advisor's mean kernel, the kernels' spread and drift
(median of the last quarter against the first: steady when within 2%), and the SM clock and
power before and after (``nvidia-smi``). The verdict compares medians over rounds: advisor's
TFLOP/s against the benchmark's (the issue's bar: within 10%), and the median kernel against
the benchmark's per-call time (what the kernel gap and the clocks leave).

Then nanoGPT's vocabulary case: one training step of the logits GEMMs (forward, and the two
backward GEMMs) at 50257 and 50304 tokens, timed both ways, with gemm-shape-alignment's model of
the unpadded step after the fix: the unaligned GEMMs' padded FLOPs at the achieved TFLOP/s of
the aligned ones (here: the padded run's, from its trace).

Run on the H100 from the repository root (about 2 minutes; advisor installed, or the checkout
imported when it is not)::

    python3 benchmarks/gemm_efficiency.py --out $OUT/eff

Writes ``--out``/trace_<case>_r<round>.json (Kineto traces) and results.json. ``--device cpu``
runs the script's own code without a GPU (no kernels: every figure from a trace is n/a).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

try:  # the installed advisor (a wheel), else this checkout's
    import advisor
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import advisor

import torch
import torch.utils.benchmark as tb

from advisor.engine.efficiency import KernelEfficiency, kernel_efficiency
from advisor.engine.gpus import lookup
from advisor.ingest.base import load_trace

try:  # the wheel mounts rules/ as advisor.rules (setup.py)
    from advisor.rules.gemm_shape_alignment import padded_flops, unaligned
except ImportError:
    from rules.gemm_shape_alignment import padded_flops, unaligned

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
MAX_CALLS = 4000  # a profiled loop's calls at most (trace size)
STEADY = 0.02  # last-quarter median within 2% of the first quarter's: the clocks held

DEVICE = "cuda"  # --device cpu: a smoke test of the script's own code without a GPU
_SMI_EXTRA: list[str] = []  # the throttle-reason field nvidia-smi accepted ("" none)


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def operands(m: int, k: int, n: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    t = DTYPES[dtype]
    return (torch.randn(m, k, device=DEVICE, dtype=t), torch.randn(k, n, device=DEVICE, dtype=t))


def gpu_state() -> dict | None:
    """SM clock (MHz), its maximum, power (W), temperature and the active throttle reasons
    from ``nvidia-smi``; None where it is not there (the CPU smoke test)."""
    smi = shutil.which("nvidia-smi")
    if DEVICE != "cuda" or smi is None:
        return None
    base = ["clocks.sm", "clocks.max.sm", "power.draw", "temperature.gpu"]
    # the throttle field was renamed (clocks_event_reasons) in newer drivers: each name is
    # tried, then none, so an unknown field never costs the clocks
    tries = _SMI_EXTRA or ("clocks_event_reasons.active", "clocks_throttle_reasons.active", "")
    for extra in tries:
        fields = base + ([extra] if extra else [])
        try:
            out = subprocess.run([smi, f"--query-gpu={','.join(fields)}",
                                  "--format=csv,noheader,nounits",
                                  f"--id={torch.cuda.current_device()}"], capture_output=True,
                                 text=True, timeout=10, check=True).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            continue
        _SMI_EXTRA[:] = [extra]  # the field this driver knows, for the next calls
        return dict(zip(["sm_mhz", "max_sm_mhz", "power_w", "temp_c", "throttle"],
                        (v.strip() for v in out.split(",")), strict=False))
    return None


def warm(fn, seconds: float) -> None:
    """Run ``fn`` for about ``seconds``: clocks up, cuBLAS's heuristics and workspaces settled."""
    end = time.perf_counter() + seconds
    fn()
    sync()
    while time.perf_counter() < end:
        for _ in range(10):
            fn()
        sync()


def timed(fn, min_run_time: float) -> tuple[float, int]:
    """Median seconds per call without a profiler, and how many calls the timed blocks made.
    torch.utils.benchmark synchronizes CUDA around each block of calls, not after every call
    (a sync per call would add its latency to each GEMM)."""
    m = tb.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    return m.median, m.number_per_run * len(m.times)


def profiled(fn, path: Path, calls: int) -> float:
    """``calls`` calls under torch.profiler with shapes, between two CUDA events (host clock on
    the CPU); exported as a Kineto trace. Returns seconds per call of the profiled loop."""
    fn()
    sync()
    cuda = DEVICE == "cuda"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            *([torch.profiler.ProfilerActivity.CUDA] if cuda else [])],
                                record_shapes=True) as prof:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if cuda:
            end.record()
        sync()
        sec = (start.elapsed_time(end) / 1e3) if cuda else time.perf_counter() - t0
    prof.export_chrome_trace(str(path))
    return sec / calls


def advisor_gemms(path: Path) -> tuple[list[KernelEfficiency], dict[int, int]]:
    """advisor's GEMM entries of a trace (all its kernels: a benchmark has no steps), and each
    kernel's duration by id (for the median single kernel and the drift)."""
    g = load_trace(path)
    gpu = g.info.gpus[0] if g.info.gpus else None
    spec = lookup(gpu.name, gpu.compute_capability) if gpu else None
    kernels = list(g.kernels())
    gemms = [k for k in kernel_efficiency(g, kernels, spec) if k.category == "gemm"]
    return gemms, {o.id: o.duration_ns for o in kernels}


def _quarter_drift(durations: list[int]) -> float | None:
    """Median of the last quarter of the loop's kernels over the first quarter's, minus one."""
    q = len(durations) // 4
    if q < 2:
        return None
    return statistics.median(durations[-q:]) / statistics.median(durations[:q]) - 1


def one_round(fn, m: int, k: int, n: int, path: Path, min_run_time: float) -> dict:
    """The benchmark and the profiled loop back to back, with the GPU's state around each."""
    flops = 2.0 * m * n * k
    before = gpu_state()
    bench_s, bench_calls = timed(fn, min_run_time)
    between = gpu_state()
    calls = max(20, min(MAX_CALLS, bench_calls))
    loop_s = profiled(fn, path, calls)
    after = gpu_state()
    gemms, durations = advisor_gemms(path)
    got = [x for x in gemms if x.sizes == (1, m, k, n)]
    x = got[0] if got else None
    singles = [durations[i] for i in x.op_ids] if x else []
    kernel_s = statistics.median(singles) / 1e9 if singles else None
    advisor_s = x.time_ns / x.launches / 1e9 if x and x.launches else None

    def tf(s: float | None) -> float | None:
        return flops / s / 1e12 if s else None
    return {
        "calls_bench": bench_calls, "calls_profiled": calls,
        "bench_ms": bench_s * 1e3, "profiled_loop_ms": loop_s * 1e3,
        "kernel_median_ms": kernel_s * 1e3 if kernel_s else None,
        "advisor_ms": advisor_s * 1e3 if advisor_s else None,
        "bench_tflops": tf(bench_s), "profiled_loop_tflops": tf(loop_s),
        "kernel_median_tflops": tf(kernel_s), "advisor_tflops": x.tflops if x else None,
        "kernel_p10_p90_ms": ([statistics.quantiles(singles, n=10)[0] / 1e6,
                               statistics.quantiles(singles, n=10)[-1] / 1e6]
                              if len(singles) >= 10 else None),
        "drift": _quarter_drift(singles), "kernel": x.kernel if x else None,
        "precision": x.precision if x else None, "peak_tflops": x.peak_tflops if x else None,
        "of_roof": x.of_roof if x else None,
        "gpu_before_bench": before, "gpu_after_bench": between, "gpu_after_profiled": after,
        "trace": path.name,
    }


def _med(rounds: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _pct(a: float | None, b: float | None) -> str:
    return f"{a / b - 1:+.1%}" if a and b else "n/a"


def _num(v: float | None, fmt: str = ".1f") -> str:
    return format(v, fmt) if v is not None else "n/a"


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


def gemm_cases(args: argparse.Namespace, results: dict, t0: float) -> None:
    """Every case, ``--rounds`` rounds each (fewer when ``--budget`` runs short)."""
    print(f"{'shape':22} {'dtype':5} {'bench':>7} {'loop':>7} {'kernel':>7} {'advisor':>7} "
          f"{'adv/bench':>9} {'kern/bench':>10} {'drift':>6} {'SM MHz':>11}  (TFLOP/s, medians)")
    for name, m, k, n, dtype in CASES:
        a, b = operands(m, k, n, dtype)

        def fn(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            return torch.mm(a, b)
        warm(fn, args.warmup)
        rounds = []
        for r in range(args.rounds):
            if r and time.perf_counter() - t0 > args.budget:
                break  # at least one round per case; the rest only within the budget
            path = args.out / f"trace_{re.sub(r'[^0-9a-z]+', '_', name)}_r{r}.json"
            rounds.append(one_round(fn, m, k, n, path, args.min_run_time))
        del a, b, fn
        med = {key: _med(rounds, key) for key in
               ("bench_tflops", "profiled_loop_tflops", "kernel_median_tflops", "advisor_tflops",
                "bench_ms", "kernel_median_ms", "advisor_ms", "profiled_loop_ms")}
        drifts = [r["drift"] for r in rounds if r["drift"] is not None]
        clocks = sorted({(r["gpu_after_bench"] or {}).get("sm_mhz", "") for r in rounds}
                        | {(r["gpu_after_profiled"] or {}).get("sm_mhz", "") for r in rounds} - {""})
        print(f"{name:22} {dtype:5} {_num(med['bench_tflops']):>7} "
              f"{_num(med['profiled_loop_tflops']):>7} {_num(med['kernel_median_tflops']):>7} "
              f"{_num(med['advisor_tflops']):>7} "
              f"{_pct(med['advisor_tflops'], med['bench_tflops']):>9} "
              f"{_pct(med['kernel_median_tflops'], med['bench_tflops']):>10} "
              f"{(f'{max(drifts, key=abs):+.1%}' if drifts else 'n/a'):>6} "
              f"{'/'.join(clocks) or 'n/a':>11}")
        results["cases"].append({
            "case": name, "dtype": dtype, "m": m, "k": k, "n": n, "medians": med,
            "advisor_vs_bench": (med["advisor_tflops"] / med["bench_tflops"] - 1
                                 if med["advisor_tflops"] and med["bench_tflops"] else None),
            "kernel_vs_bench": (med["kernel_median_tflops"] / med["bench_tflops"] - 1
                                if med["kernel_median_tflops"] and med["bench_tflops"] else None),
            "steady": all(abs(d) <= STEADY for d in drifts) if drifts else None,
            "rounds": rounds})


def vocab_case(args: argparse.Namespace, results: dict) -> None:
    step, traces, n_steps = {}, {}, {}
    for vocab in (50257, 50304):
        fn = vocab_step(vocab)
        warm(fn, args.warmup)
        step[vocab], calls = timed(fn, args.min_run_time)
        traces[vocab] = args.out / f"trace_vocab_step_{vocab}.json"
        n_steps[vocab] = max(5, min(MAX_CALLS, calls))
        profiled(fn, traces[vocab], n_steps[vocab])
    aligned, _ = advisor_gemms(traces[50304])
    rate = sum(g.flops or 0 for g in aligned) / max(sum(g.time_ns for g in aligned), 1)  # FLOP/ns
    rate = rate or float("nan")  # no kernels (--device cpu)
    plain, _ = advisor_gemms(traces[50257])
    off = [g for g in plain if unaligned(g)]
    now_ns = sum(g.time_ns for g in plain) / n_steps[50257]
    fixed_ns = (sum(g.time_ns for g in plain if not unaligned(g))
                + sum(padded_flops(g) / rate for g in off)) / n_steps[50257]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--min-run-time", type=float, default=0.3,
                    help="seconds the benchmark times per round; the profiled loop runs as many calls")
    ap.add_argument("--rounds", type=int, default=3, help="benchmark + profiled loop, back to back")
    ap.add_argument("--warmup", type=float, default=0.3, help="seconds of calls before a case")
    ap.add_argument("--budget", type=float, default=200,
                    help="seconds after which each case gets one round only")
    ap.add_argument("--device", default="cuda", help="cpu: smoke-test the script (no kernels)")
    ap.add_argument("--rows", type=int, default=0, help="override M (a small smoke test)")
    args = ap.parse_args()
    global DEVICE, TOKENS, CASES
    DEVICE = args.device
    if args.rows:
        TOKENS = args.rows
        CASES = [(c, args.rows, k, n, d) for c, _, k, n, d in CASES]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    print(f"GPU: {gpu}; torch {torch.__version__}; advisor from {Path(advisor.__file__).parent}")
    results = {"gpu": gpu, "torch": torch.__version__, "advisor": str(Path(advisor.__file__).parent),
               "method": {"min_run_time_s": args.min_run_time, "rounds": args.rounds,
                          "warmup_s": args.warmup, "steady_within": STEADY},
               "gpu_at_start": gpu_state(), "cases": [], "vocab_step": {}}
    gemm_cases(args, results, t0)
    vocab_case(args, results)
    results["seconds"] = time.perf_counter() - t0
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n{results['seconds']:.0f} s; results in {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
