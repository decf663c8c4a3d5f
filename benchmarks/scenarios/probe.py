"""Device probe: versions, API checks the scenarios rely on, and correctness self-checks."""

import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import env_info, load_scenario

out = {"env": env_info()}
try:
    out["nsys"] = subprocess.run(["nsys", "--version"], capture_output=True, text=True).stdout.strip()
except Exception as e:
    out["nsys"] = f"not found: {e}"
out["scaled_mm_schema"] = [str(o._schema) for o in (torch.ops.aten._scaled_mm.default, torch.ops.aten._scaled_mm.out)]
out["addmm_activation_schema"] = str(torch.ops.aten._addmm_activation.default._schema)
out["host_emptyCache"] = hasattr(torch._C, "_host_emptyCache")
gg = load_scenario("unfused-gemm-gelu")
out["addmm_activation_check"] = gg.check_addmm_activation()
out["addmm_activation_bf16_kernels"] = gg.epilogue_kernels()
# the checkpointed first forward pass: good must show the gelu epilogue GEMM and no GELU kernel
out["gelu_first_pass_kernels"] = {v: gg.forward_kernels(v) for v in ("bad", "good")}
out["rng_dropout_selfcheck"] = load_scenario("rng-bound-dropout").selfcheck()
out["cpu_bound_loss_selfcheck"] = load_scenario("cpu-bound-loss").selfcheck()
out["loader_jitter_flush_steps"] = load_scenario("loader-jitter").flush_steps(65)
if "--fp8" in sys.argv:
    out["fp8_linear_selfcheck"] = load_scenario("fp8-candidate").selfcheck()
print(json.dumps(out, indent=1))
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "probe.json"), "w") as f:
        json.dump(out, f, indent=1)

if "--smoke" in sys.argv:
    import gc
    import time

    from harness import noop_mark
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or sorted(
        d for d in os.listdir(os.path.dirname(os.path.abspath(__file__))) if os.path.exists(
            os.path.join(os.path.dirname(os.path.abspath(__file__)), d, "scenario.py")))
    for name in names:
        for v in ("bad", "good"):
            t0 = time.perf_counter()
            try:
                m = load_scenario(name)
                s = m.build(v, "cuda")
                for _ in range(3):
                    s.step(noop_mark)
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                s.step(noop_mark)
                torch.cuda.synchronize()
                print(f"SMOKE ok   {name}/{v}: build+3 steps {t1 - t0:.1f}s, 1 step {1e3 * (time.perf_counter() - t1):.2f} ms, "
                      f"max mem {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
            except Exception as e:
                import traceback
                traceback.print_exc()
                print(f"SMOKE FAIL {name}/{v}: {type(e).__name__}: {e}", flush=True)
            s = m = None
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
