"""A DDP job whose ranks get unequal work per step, the rank with the most changing every step:
what `load-imbalance` (rules/job/load_imbalance.py) is about, on 3 or more ranks.

    torchrun --standalone --nproc_per_node=4 ddp_imbalance.py --variant imbalanced --steps 60
    torchrun --standalone --nproc_per_node=4 ddp_imbalance.py --variant balanced --steps 60

Each step every rank trains on a batch of variable-length token rows, as a DistributedSampler over
unbucketed sequences gives them: in ``imbalanced`` the ranks' token counts are a rotation of
0.5x .. 1.5x the mean (a new rotation each step, seeded: the slowest rank changes, no rank sets
most of the pace); in ``balanced`` (the fix the rule names: pack to a fixed token budget per rank)
every rank gets the mean. Both variants train on the same number of tokens per step in total.
The model is an MLP stack (d 1024, FF 4096, 8 blocks, bf16 autocast) under DDP on NCCL; nothing is
downloaded. NCCL runs one rank per GPU (it refuses two ranks on one device: "Duplicate GPU
detected"), so the job needs as many GPUs as ranks.

The script's own log is the measurement: after ``--warmup`` steps, rank 0 times each step
between two ``torch.cuda.synchronize()`` calls (the all-reduce makes every rank wait for the
slowest, so rank 0's step is the job's) and prints ``step_ms mean=... median=... n=...``.
It runs unchanged under ``advisor profile torchrun ...`` (steps are cut at optimizer.step()).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, d: int, ff: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.down = nn.Linear(ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d: int, ff: int, depth: int, classes: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block(d, ff) for _ in range(depth)))
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def tokens_per_rank(step: int, world: int, mean: int, variant: str) -> list[int]:
    """Each rank's token count this step: the mean for ``balanced``; for ``imbalanced`` a
    seeded rotation of 0.5x .. 1.5x the mean (the same total, to a token per rank)."""
    if variant == "balanced":
        return [mean] * world
    shares = [0.5 + i / (world - 1) for i in range(world)] if world > 1 else [1.0]
    g = torch.Generator().manual_seed(1000 + step)
    order = torch.randperm(world, generator=g).tolist()
    return [round(mean * shares[order[r]]) for r in range(world)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=("imbalanced", "balanced"), required=True)
    ap.add_argument("--steps", type=int, default=60, help="timed steps after the warm-up")
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=16384, help="mean tokens per rank per step")
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--ff", type=int, default=4096)
    ap.add_argument("--depth", type=int, default=8)
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", 1)):
        raise SystemExit(f"error: {os.environ.get('LOCAL_WORLD_SIZE')} ranks on "
                         f"{torch.cuda.device_count()} GPUs: NCCL runs one rank per GPU")
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Net(args.d, args.ff, args.depth, 1000).cuda(), device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    # inputs made once per size on the GPU: the step is the model's work, not the host's
    pool: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if n not in pool:
            pool[n] = (torch.randn(n, args.d, device="cuda"), torch.randint(0, 1000, (n,), device="cuda"))
        return pool[n]

    times: list[float] = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = batch(tokens_per_rank(step, world, args.tokens, args.variant)[rank])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        print(f"variant={args.variant} world={world} tokens/rank mean={args.tokens} "
              f"step_ms mean={statistics.mean(times):.3f} median={statistics.median(times):.3f} "
              f"min={min(times):.3f} max={max(times):.3f} n={len(times)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
