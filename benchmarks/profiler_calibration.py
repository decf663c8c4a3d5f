"""Workloads that calibrate the profilers' host cost per CUDA call and per traced operator.

Launch-bound on purpose (every microsecond of host time is step time), built only for the
calibration, so that the checks in `unprofiled_check.py` (nanoGPT, timm, the scenarios) run on
captures disjoint from the fit. Three workloads with different mixes of framework operators and
CUDA calls, so the two costs can be told apart:

    chain   tiny elementwise ops, one kernel each (one operator : one launch)
    views   each kernel among three view/reshape operators that launch nothing
    mlp     a narrow MLP trained with per-parameter (for-loop) AdamW: autograd, optimizer

and, to measure each kind of recorded event alone (``--workload`` names them; not in the
default set), steps of ``n`` repetitions of one thing:

    pyfunc      a Python function call (one Python event, nothing else)
    builtin     a C builtin call (one Python event for the C call)
    cpu-op      ``torch.neg`` on a CPU tensor (a C call and one operator)
    cuda-view   ``view`` of a CUDA tensor (a C call and one operator, no launch)
    cuda-op     ``torch.neg`` on a CUDA tensor (a C call, one operator, one launch)
    deep-op     ``cuda-op`` 40 Python frames deep (does the cost grow with the stack?)

``--rounds K`` alternates K blocks of plain steps with K traced blocks in one process (plain,
traced, plain, ..., plain) and writes each traced block's trace: the plain blocks on either side
bound how far the host's own speed moved while it was traced.

One process per (mode): ``plain`` times every workload without a profiler (host clock per step,
CUDA synchronised at the ends of the block); ``kineto`` / ``kineto-stack`` record each workload's
window with torch.profiler (record_shapes=True, with_stack False/True: `advisor profile`'s own
setting is the first); ``nsys`` runs one workload between cudaProfilerStart/Stop for
``nsys profile --capture-range=cudaProfilerApi``. Steps are marked with `advisor.capture.step`
(NVTX, and record_function while torch.profiler records), as a user would.

    python benchmarks/profiler_calibration.py --mode plain --out DIR
    python benchmarks/profiler_calibration.py --mode kineto --out DIR
    nsys profile ... python benchmarks/profiler_calibration.py --mode nsys --workload mlp --out DIR

`unprofiled_check.py collect` runs these on the H100; `unprofiled_check.py fit` fits the costs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

WORKLOADS = ("chain", "views", "mlp")
WARM, TIMED, TRACED = 30, 60, 8
SINGLE = ("pyfunc", "builtin", "cpu-op", "cuda-view", "cuda-op", "deep-op")
"""One kind of event per repetition (module docstring)."""


def build_single(name: str, dev, n: int):
    import torch

    def noop(a):
        return a
    if name == "pyfunc":
        return lambda: [noop(i) for i in range(n)]
    if name == "builtin":
        return lambda: [abs(i) for i in range(n)]
    x = torch.ones(16, device="cpu" if name == "cpu-op" else dev)
    if name == "cuda-view":
        return lambda: [x.view(-1) for _ in range(n)]
    if name in ("cpu-op", "cuda-op"):
        return lambda: [torch.neg(x) for _ in range(n)]

    def deep(k):
        return deep(k - 1) if k else [torch.neg(x) for _ in range(n)]
    return lambda: deep(40)


def build(name: str, dev, tiny: bool):
    import torch
    from torch import nn

    n = 40 if tiny else 300
    if name in SINGLE:
        return build_single(name, dev, n if tiny else 1000)
    if name == "chain":
        x0 = torch.randn(1024, device=dev)

        def step():
            x = x0
            for _ in range(n):
                x = x * 1.0001 + 0.001
            return x
        return step
    if name == "views":
        x0 = torch.randn(64, 64, device=dev)

        def step():
            x = x0
            for _ in range(n // 2):
                x = x.view(4096).view(64, 64).t().contiguous()
            return x
        return step
    layers = []
    for _ in range(4 if tiny else 24):
        layers += [nn.Linear(256, 256), nn.GELU()]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    xb = torch.randn(64, 256, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(xb).square().mean()
        loss.backward()
        opt.step()
    return step


def sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize()


def run_plain(step, dev, steps: int) -> dict:
    times = []
    sync(dev)
    t0 = last = time.perf_counter_ns()
    for _ in range(steps):
        step()
        now = time.perf_counter_ns()
        times.append(now - last)
        last = now
    sync(dev)
    total = time.perf_counter_ns() - t0
    ms = [t / 1e6 for t in times]
    return {"median_ms": statistics.median(ms), "mean_ms": total / 1e6 / steps,
            "per_step_ms": ms}


def run_kineto(step, dev, steps: int, stack: bool, trace: Path) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import advisor.capture as ac
    from advisor.capture.window import cupti_teardown

    # as `advisor profile` does: without it CUPTI stays subscribed after the trace and every
    # later plain block of this process runs slower (the first device run of the single-event
    # workloads measured a launch-bound loop at 5.0 ms before its first trace, 10.8 after)
    cupti_teardown()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    times = []
    with profile(activities=acts, record_shapes=True, with_stack=stack) as prof:
        sync(dev)
        last = time.perf_counter_ns()
        for _ in range(steps):
            with ac.step():
                step()
            now = time.perf_counter_ns()
            times.append((now - last) / 1e6)
            last = now
        sync(dev)
    raw = trace.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(trace, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    del torch
    return {"median_ms": statistics.median(times[1:]), "per_step_ms": times}


def run_nsys(step, dev, steps: int) -> dict:
    import torch

    import advisor.capture as ac

    times = []
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    last = time.perf_counter_ns()
    for _ in range(steps):
        with ac.step():
            step()
        now = time.perf_counter_ns()
        times.append((now - last) / 1e6)
        last = now
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return {"median_ms": statistics.median(times[1:]), "per_step_ms": times}


def _without_steps(timing: dict) -> dict:
    return {k: v for k, v in timing.items() if k != "per_step_ms"}


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True, choices=["plain", "kineto", "kineto-stack", "nsys"])
    ap.add_argument("--workload", choices=WORKLOADS + SINGLE, action="append")
    ap.add_argument("--rounds", type=int, default=1,
                    help="traced blocks per workload, each between plain blocks")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="small sizes for a CPU smoke run")
    a = ap.parse_args()
    dev = torch.device(a.device)
    a.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in a.workload or WORKLOADS:
        torch.manual_seed(0)
        step = build(name, dev, a.tiny)
        for _ in range(WARM if not a.tiny else 3):
            step()
        sync(dev)
        if a.mode == "plain":
            r = run_plain(step, dev, TIMED if not a.tiny else 10)
        else:
            # the same process's plain steps just before the traced ones: processes differ by
            # up to 20% in host speed on the H100 machine, so the fit compares within one
            timed = TIMED if not a.tiny else 10
            before = run_plain(step, dev, timed)
            rounds = []
            for i in range(a.rounds):
                suffix = f"-r{i}" if a.rounds > 1 else ""
                if a.mode == "nsys":
                    r = run_nsys(step, dev, TRACED)
                else:
                    r = run_kineto(step, dev, TRACED, a.mode == "kineto-stack",
                                   a.out / f"{name}-{a.mode}{suffix}.json.gz")
                r["plain_before"] = _without_steps(before)
                if a.rounds > 1:  # the plain block after this one is the next one's before
                    before = run_plain(step, dev, timed)
                    r["plain_after"] = _without_steps(before)
                rounds.append(r)
            r = rounds[0] if len(rounds) == 1 else {**rounds[0], "rounds": rounds}
        results[name] = r
        print(f"calibration {a.mode} {name}: median {r['median_ms']:.3f} ms", flush=True)
    tag = a.mode if a.mode != "nsys" else f"nsys-{'-'.join(a.workload or WORKLOADS)}"
    (a.out / f"{tag}.json").write_text(json.dumps(
        {"mode": a.mode, "device": str(dev), "torch": torch.__version__,
         "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
         "env": {k: v for k, v in os.environ.items() if k.startswith("ADVISOR_")},
         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
