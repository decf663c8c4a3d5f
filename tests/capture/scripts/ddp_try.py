"""A tiny data-parallel job for `advisor profile --try` under torchrun (gloo, on the CPU).

Each rank trains a small MLP wrapped in DistributedDataParallel on its share of the data
(DistributedSampler), so every step ends in the gradients' all-reduce across the ranks.
``--observe PREFIX`` appends one JSON line per step to ``PREFIX.rank<R>.jsonl`` with what that
rank sees: its DataLoader's workers and the DDP wrapper's settings. ``--raise-on-rank R`` makes
rank R raise once its DataLoader has worker processes (a script that one rank's loader fix
breaks). ``--local`` trains without DDP (no collective per step, one barrier at the end) and
``--slow-rank R --slow-ms MS`` makes rank R sleep MS per step: ranks that run at their own pace.

    torchrun --standalone --nproc-per-node 2 ddp_try.py [--iters N] [--observe PREFIX] [...]
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--observe", default=None)
    p.add_argument("--raise-on-rank", type=int, default=-1)
    p.add_argument("--local", action="store_true")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2048, 16), torch.randn(2048, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=False))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    ddp = {}
    if not args.local:
        model = DistributedDataParallel(model)
        ddp = {"bucket_cap_mb": model.bucket_bytes_cap / 2**20,
               "gradient_as_bucket_view": model.gradient_as_bucket_view}
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while step < args.iters:
        for x, y in loader:
            if rank == args.raise_on_rank and loader.num_workers > 0:
                raise RuntimeError(f"rank {rank} cannot load with worker processes")
            if rank == args.slow_rank:
                time.sleep(args.slow_ms / 1e3)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if args.observe:
                with open(f"{args.observe}.rank{rank}.jsonl", "a") as fh:
                    fh.write(json.dumps({"rank": rank, "step": step,
                                         "num_workers": loader.num_workers, "ddp": ddp}) + "\n")
            step += 1
            if step >= args.iters:
                break
    dist.barrier()
    dist.destroy_process_group()
    print(f"ddp_try: rank {rank} done {step} iterations")


if __name__ == "__main__":
    main()
