"""Time fp8-candidate's fix on the DDP job's per-rank step, on one GPU (issue #35).

fp8-candidate raises on five rank traces of the 2-GPU DDP job (``fixtures/jobs``): 1.02-1.06x
for FP8 over compile alone, priced without shapes (neither the torch.profiler traces nor the
nsys export recorded them). Only one GPU is lent, so this runs the job's model and step as one
rank runs it (``train_ddp.GPT``: d 1024, 8 layers, 16 heads, sequence 512, a 32,768-token
head; fp32 weights under bf16 autocast; the float cross-entropy; fused AdamW), without the
all-reduces. FP8 changes the GEMMs and adds casts; both are on each rank's compute stream, so
the per-rank step's compute is where its gain or loss is. Data are random tokens already on
the GPU: the loader is not what the fix changes.

``--fix``:
* ``eager``        the step as the job runs it;
* ``compile``      ``torch.compile(model)`` (the route's baseline: FP8's casts need it);
* ``fp8-compile``  torchao float8 training, every Linear but the head (the filter the rule's
  fix names, ``fqn != "head"``), then compile.

Each run is one process: ``--warmup`` steps (compile happens there), then ``--timed`` steps
with CUDA events at each step's boundaries, a JSON per run; with ``--kernels``, three more steps
under torch.profiler (CUDA only) and the kernels' total time by name. The driver,
``fp8_per_rank.sh``, runs the variants interleaved, three processes each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_ddp import GPT  # the job's own model, not a copy


def build(args):
    torch.manual_seed(0)
    model = GPT(args.vocab, args.dim, args.layers, args.heads, args.seq).cuda()
    converted = []
    if args.fix == "fp8-compile":
        from torchao.float8 import convert_to_float8_training

        def keep(mod: nn.Module, fqn: str) -> bool:
            ok = fqn != "head" and (not isinstance(mod, nn.Linear)
                                    or (mod.in_features % 16 == 0 and mod.out_features % 16 == 0))
            if ok and isinstance(mod, nn.Linear):
                converted.append(fqn)
            return ok

        convert_to_float8_training(model, module_filter_fn=keep)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    run = torch.compile(model) if args.fix in ("compile", "fp8-compile") else model
    return model, run, opt, converted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fix", choices=("eager", "compile", "fp8-compile"), required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--timed", type=int, default=30)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    t0 = time.perf_counter()
    _model, run, opt, converted = build(args)
    pool = [(torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda"),
             torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")) for _ in range(4)]
    amp = torch.autocast("cuda", dtype=torch.bfloat16)
    k = 0

    def step() -> None:
        nonlocal k
        for _ in range(args.accum):
            x, y = pool[k % len(pool)]
            k += 1
            with amp:
                logits = run(x)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten()) / args.accum
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(args.timed + 1)]
    w0 = time.perf_counter()
    ev[0].record()
    for i in range(args.timed):
        step()
        ev[i + 1].record()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - w0) * 1e3 / args.timed
    steps = [ev[i].elapsed_time(ev[i + 1]) for i in range(args.timed)][1:]  # first: harness's own
    out = {"fix": args.fix, "batch": args.batch, "accum": args.accum, "seq": args.seq,
           "dim": args.dim, "layers": args.layers, "warmup_s": round(warm_s, 2),
           "step_ms_cuda_events": {"mean": statistics.fmean(steps), "median": statistics.median(steps),
                                   "min": min(steps), "max": max(steps)},
           "wall_ms_per_step": wall_ms, "per_step_ms": [round(s, 4) for s in steps],
           "converted_linears": converted,
           "max_memory_allocated_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1),
           "env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}}
    if args.kernels:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        totals: dict[str, list[float]] = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t = totals.setdefault(e.name, [0, 0.0])
                t[0] += 1
                t[1] += e.time_range.elapsed_us()
        out["kernels_3_steps_us"] = sorted(([n, c, round(us, 1)] for n, (c, us) in totals.items()),
                                           key=lambda r: -r[2])[:80]
    with contextlib.suppress(FileExistsError):
        Path(args.out).parent.mkdir(parents=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"{args.fix} b{args.batch} a{args.accum}: {out['step_ms_cuda_events']['median']:.2f} ms "
          f"(mean {out['step_ms_cuda_events']['mean']:.2f}), warm-up {warm_s:.0f} s, "
          f"{len(converted)} Linears in FP8")


if __name__ == "__main__":
    main()
