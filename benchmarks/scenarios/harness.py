"""Measurement harness for the planted-anti-pattern scenarios.

One invocation = one fresh process = one (scenario, variant, mode):

    python3 harness.py timing    --scenario host-sync --variant bad --out DIR
    python3 harness.py torchprof --scenario host-sync --variant bad --out DIR
    nsys profile -t cuda,nvtx,osrt,cublas,cudnn --sample=none --cpuctxsw=none \
        --capture-range=cudaProfilerApi --capture-range-end=stop -o DIR/nsys -f true \
        python3 harness.py nsys --scenario host-sync --variant bad --out DIR

Modes
  timing     warm-up, then --steps (50) steps with no marks and no profiler.  Per-step
             times from CUDA events recorded on the current stream at each step
             boundary; total wall time with torch.cuda.synchronize() at both ends.
             Writes DIR/timing.json.
  torchprof  warm-up, then torch.profiler (CPU+CUDA, schedule wait=1 warmup=2 active=10,
             record_shapes=True, with_stack=False), prof.step() once per step, phases as
             record_function ranges.  Writes DIR/trace.json (the driver gzips it).
  nsys       warm-up, cudaProfilerStart, 12 steps each in an NVTX range "step <N>" with
             phases as NVTX ranges, cudaProfilerStop.  Writes DIR/nsys_timing.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import json
import os
import platform
import socket
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_scenario(name: str):
    path = os.path.join(HERE, name, "scenario.py")
    spec = importlib.util.spec_from_file_location(f"scenario_{name.replace('-', '_')}", path)
    mod = importlib.util.module_from_spec(spec)
    # registered before it runs: torch.compile's Dynamo imports a traced function's module by
    # name, and a module loaded from a path is otherwise unknown to the import system
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def noop_mark(name: str):
    return contextlib.nullcontext()


def record_function_mark(name: str):
    return torch.profiler.record_function(name)


@contextlib.contextmanager
def nvtx_mark(name: str):
    torch.cuda.nvtx.range_push(name)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def stats_ms(xs):
    return {
        "mean": statistics.fmean(xs),
        "median": statistics.median(xs),
        "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min": min(xs),
        "max": max(xs),
        "n": len(xs),
    }


def env_info():
    p = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "gpu_sm_count": p.multi_processor_count,
        "gpu_mem_gib": round(p.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def warm_up(obj, n):
    t0 = time.perf_counter()
    for _ in range(n):
        obj.step(noop_mark)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def timed_loop(obj, steps, mark, per_step_wrap=None):
    """Run `steps` steps; CUDA events at every step boundary on the current stream."""
    evs = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    host_t = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    evs[0].record()
    host_t.append(time.perf_counter())
    for i in range(steps):
        if per_step_wrap is not None:
            with per_step_wrap(i):
                obj.step(mark)
        else:
            obj.step(mark)
        evs[i + 1].record()
        host_t.append(time.perf_counter())
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    ev_ms = [evs[i].elapsed_time(evs[i + 1]) for i in range(steps)]
    host_ms = [(host_t[i + 1] - host_t[i]) * 1e3 for i in range(steps)]
    return ev_ms, host_ms, wall


def standalone(build, variants=("bad", "good"), device_flag=False, warmup=0, note=None, argv=None):
    """A scenario script's own command line (``python scenario.py --variant bad``): a quick look
    at one variant's step time, the loop every scenario used to copy. ``warmup`` steps run first;
    then --steps steps with no marks and no profiler, synchronized at both ends, are timed by the
    host clock and printed as ms/step (``note(scenario)`` appends what the scenario adds). The
    measurement of record is this file's `timing` mode; this is the same step, timed simply.
    ``device_flag``: the script takes --device (CPU runs for a smoke test)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="bad", choices=list(variants))
    ap.add_argument("--steps", type=int, default=60)
    if device_flag:
        ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    device = a.device if device_flag else "cuda"
    s = build(a.variant, device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    for _ in range(warmup):
        s.step(noop_mark)
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        s.step(noop_mark)
    sync()
    print(f"{a.variant}: {a.steps} steps, {(time.perf_counter() - t0) * 1e3 / a.steps:.3f} ms/step"
          + (note(s) if note is not None else ""))
    return s


FIXES = ("compile", "compile-loss", "max-autotune-no-cudagraphs", "fp8-compile", "gelu-epilogue")
"""Fixes the harness applies on top of a variant (``--fix``), to time a finding raised on a fixed
capture (docs/validation.md, "No false findings on healthy steps"): ``compile`` is
``torch.compile(model)``, compiler-fusion's fix; ``compile-loss`` the same plus
``torch.compile`` of the scenario's ``loss_fn`` (compiler-fusion's fix where the loss after the
model holds the chains); ``max-autotune-no-cudagraphs`` the model compiled in that Inductor mode,
whose autotuned Triton GEMM templates can take a GELU into their epilogue (unfused-gemm-gelu's fix
measured against ``compile``; without CUDA graphs, whose saved launches are another rule's);
``fp8-compile`` torchao float8 training then compile, fp8-candidate's compile route;
``gelu-epilogue`` the scenarios' GEMM+GELU site through one cuBLASLt GEMM with the GELU_AUX_BIAS
epilogue (`gelu_epilogue.py`: unfused-gemm-gelu's fix, as Transformer Engine's fused MLP runs it),
the model left eager."""


def apply_fix(obj, fix):
    """Apply ``fix`` to the scenario's ``model`` in place (every eager scenario keeps its network
    there; its optimizer holds the same parameters, which compile and float8 keep)."""
    if fix is None:
        return obj
    if fix == "gelu-epilogue":
        import gelu_epilogue

        gelu_epilogue.use(True)
        return obj
    model = getattr(obj, "model", None)
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"--fix {fix}: this scenario has no .model to apply it to")
    if fix == "fp8-compile":
        from torchao.float8 import convert_to_float8_training

        # torchao's FP8 GEMM (torch._scaled_mm) needs both dimensions of a weight divisible by
        # 16; a Linear that is not (a 1000-class head) stays in BF16, the filter torchao's docs use
        convert_to_float8_training(model, module_filter_fn=lambda m, _fqn: (
            not isinstance(m, torch.nn.Linear) or (m.in_features % 16 == 0 and m.out_features % 16 == 0)))
    if fix == "compile-loss":
        loss_fn = getattr(obj, "loss_fn", None)
        if loss_fn is None:
            raise SystemExit(f"--fix {fix}: this scenario has no .loss_fn to compile")
        obj.loss_fn = torch.compile(loss_fn)
    obj.model = torch.compile(model, mode=fix if fix.startswith("max-autotune") else None)
    return obj


def result_dict(args, obj, warm_s, ev_ms, host_ms, wall, mode):
    d = {
        "scenario": args.scenario,
        "variant": args.variant,
        "fix": getattr(args, "fix", None),
        "mode": mode,
        "warmup_steps": args.warmup,
        "warmup_s": round(warm_s, 3),
        "steps": len(ev_ms),
        "step_ms_cuda_events": stats_ms(ev_ms),
        "wall_ms_per_step": wall * 1e3 / len(ev_ms),
        "wall_total_s": wall,
        "host_step_ms": stats_ms(host_ms),
        "per_step_ms": [round(x, 4) for x in ev_ms],
        "max_memory_allocated_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1),
        "env": env_info(),
    }
    info = getattr(obj, "info", None)
    if info:
        d["scenario_info"] = info
    return d


def ab_blocks(args, obj) -> None:
    """``ab`` mode: the variant and the variant with ``--fix`` timed in one process, in
    alternating blocks of ``--steps`` steps (ABBA: base, fix, fix, base, ...), each block written
    as its own ``timing.json``-shaped file (``ab-base-<k>.json``, ``ab-<fix>-<k>.json``).

    Why: a host-bound step's time moves between processes (and within one: a compiled run of
    host-sync's went from 8.1-8.8 to 10-11.6 ms a step mid-run, wave 10), more than a 2-4% fix
    gains, so runs in separate processes settled nothing on those steps. Here both programs share
    the process, its cores, its allocator and the host's state of the moment; ABBA cancels a
    drift that is linear over the run. The fix must leave the eager model callable
    (``compile``, ``compile-loss``: ``torch.compile`` wraps the same module and parameters;
    ``gelu-epilogue`` swaps the GEMM+GELU site's implementation, the model untouched)."""
    if args.fix not in ("compile", "compile-loss", "gelu-epilogue"):
        raise SystemExit("ab: --fix compile, compile-loss or gelu-epilogue (a fix that leaves "
                         "the model as it was)")
    base_model, base_loss = obj.model, getattr(obj, "loss_fn", None)
    if args.fix == "gelu-epilogue":
        import gelu_epilogue

        def use(fixed: bool) -> None:
            gelu_epilogue.use(fixed)
    else:
        apply_fix(obj, args.fix)
        fixed_model, fixed_loss = obj.model, getattr(obj, "loss_fn", None)

        def use(fixed: bool) -> None:
            obj.model = fixed_model if fixed else base_model
            if base_loss is not None:
                obj.loss_fn = fixed_loss if fixed else base_loss

    warm = {}
    for fixed in (False, True):
        use(fixed)
        warm[fixed] = warm_up(obj, args.warmup)
    if args.fix == "gelu-epilogue" and gelu_epilogue.fused_calls == 0:
        raise SystemExit("ab: --fix gelu-epilogue reached no GEMM+GELU site (fp32 outside "
                         "autocast, or no site in this scenario): nothing to time")
    for k in range(args.blocks):
        order = (False, True) if k % 2 == 0 else (True, False)
        for fixed in order:
            use(fixed)
            ev_ms, host_ms, wall = timed_loop(obj, args.steps, noop_mark)
            d = result_dict(args, obj, warm[fixed], ev_ms, host_ms, wall, "ab")
            d["fix"] = args.fix if fixed else None
            d["block"] = k
            name = f"ab-{args.fix if fixed else 'base'}-{k + 1}.json"
            with open(os.path.join(args.out, name), "w") as f:
                json.dump(d, f, indent=1)
            s = d["step_ms_cuda_events"]
            print(f"[ab] {args.scenario}/{args.variant} block {k + 1} {args.fix if fixed else 'base'}: "
                  f"mean {s['mean']:.3f} ms  median {s['median']:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["timing", "torchprof", "nsys", "ab"])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--variant", required=True, help="bad, good, or one of the scenario's VARIANTS")
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--fix", choices=FIXES, default=None,
                    help="apply this fix on top of the variant (see FIXES)")
    ap.add_argument("--blocks", type=int, default=8, help="ab: blocks of --steps steps per side")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    mod = load_scenario(args.scenario)
    if args.mode == "ab":
        ab_blocks(args, mod.build(args.variant, "cuda"))
        return
    obj = apply_fix(mod.build(args.variant, "cuda"), args.fix)
    warm_s = warm_up(obj, args.warmup)
    if args.fix == "gelu-epilogue":
        import gelu_epilogue

        if gelu_epilogue.fused_calls == 0:
            raise SystemExit("--fix gelu-epilogue reached no GEMM+GELU site: nothing to time")

    if args.mode == "timing":
        ev_ms, host_ms, wall = timed_loop(obj, args.steps, noop_mark)
        d = result_dict(args, obj, warm_s, ev_ms, host_ms, wall, "timing")
        with open(os.path.join(args.out, "timing.json"), "w") as f:
            json.dump(d, f, indent=1)
        s = d["step_ms_cuda_events"]
        print(f"[timing] {args.scenario}/{args.variant}: mean {s['mean']:.3f} ms  median {s['median']:.3f}"
              f"  stdev {s['stdev']:.3f}  min {s['min']:.3f}  max {s['max']:.3f}  wall/step {d['wall_ms_per_step']:.3f}")

    elif args.mode == "torchprof":
        from torch.profiler import ProfilerActivity, profile, schedule

        trace_path = os.path.join(args.out, "trace.json")
        done = []

        def on_ready(prof):
            prof.export_chrome_trace(trace_path)
            done.append(True)

        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=2, active=10),
            record_shapes=True,
            with_stack=False,
            on_trace_ready=on_ready,
        ) as prof:
            for _ in range(13):
                obj.step(record_function_mark)
                prof.step()
        torch.cuda.synchronize()
        print(f"[torchprof] {args.scenario}/{args.variant}: trace written={bool(done)} "
              f"{os.path.getsize(trace_path) / 1e6 if done else 0:.1f} MB")

    else:  # nsys
        n = 12
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()

        @contextlib.contextmanager
        def step_range(i):
            torch.cuda.nvtx.range_push(f"step {i}")
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()

        ev_ms, host_ms, wall = timed_loop(obj, n, nvtx_mark, per_step_wrap=step_range)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        d = result_dict(args, obj, warm_s, ev_ms, host_ms, wall, "nsys")
        with open(os.path.join(args.out, "nsys_timing.json"), "w") as f:
            json.dump(d, f, indent=1)
        s = d["step_ms_cuda_events"]
        print(f"[nsys] {args.scenario}/{args.variant}: 12-step mean {s['mean']:.3f} ms (under nsys)")


if __name__ == "__main__":
    main()
