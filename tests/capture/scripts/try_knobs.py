"""A tiny training loop for `advisor profile --try`: it reports, from inside, what reached it.

Each step loads a batch through a DataLoader whose samples take 2 ms to make (so loading in
worker processes is really faster), runs a small MLP, and saves a checkpoint to ./ckpt.pt every
few steps. ``--observe FILE`` appends one JSON line per step with what the script sees: its
DataLoader's settings, whether autocast is on in forward, whether forward runs compiled, and the
TF32 flag, and with ``--ddp`` (a one-process gloo group) the DDP wrapper's settings.
``--slow-without-tf32 MS`` sleeps in forward unless TF32 is on (a step TF32 speeds up).
``--raise-under-autocast`` raises (as a script broken by bf16 would),
``--nan-under-autocast`` makes the loss NaN under autocast, ``--oom-under-autocast`` asks the
allocator for more memory than any machine has under autocast (a real allocation failure).

    python try_knobs.py [--iters N] [--observe FILE] [--save PATH] [...]
"""

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset

SEEN = {"compiling": False}


class SlowSet(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(0.002)  # reading and decoding one sample
        return torch.randn(16), torch.randn(1)


class Net(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 1))
        self.args = args

    def forward(self, x):
        if self.args.slow_without_tf32 and not torch.backends.cuda.matmul.allow_tf32:
            time.sleep(self.args.slow_without_tf32 / 1e3)  # as FP32 matmuls on a GPU are
        if torch.compiler.is_compiling():
            SEEN["compiling"] = True
        autocast = torch.is_autocast_enabled("cpu")
        SEEN["autocast"] = autocast
        if autocast and self.args.raise_under_autocast:
            raise RuntimeError("this model does not run under autocast")
        if autocast and self.args.oom_under_autocast:
            torch.empty(1 << 52, dtype=torch.uint8)  # 4 PiB: the allocator refuses
        out = self.body(x)
        if autocast and self.args.nan_under_autocast:
            out = out * float("nan")
        return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--observe", default=None)
    p.add_argument("--save", default="ckpt.pt")
    p.add_argument("--save-every", type=int, default=5)
    p.add_argument("--raise-under-autocast", action="store_true")
    p.add_argument("--nan-under-autocast", action="store_true")
    p.add_argument("--oom-under-autocast", action="store_true")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--slow-without-tf32", type=float, default=0.0, metavar="MS")
    args = p.parse_args()
    torch.manual_seed(0)
    model = Net(args)
    ddp = {}
    if args.ddp:
        import tempfile

        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        store = tempfile.mkdtemp() + "/store"  # a file store: no port to collide on
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        model = DistributedDataParallel(model)
        ddp = {"bucket_cap_mb": model.bucket_bytes_cap / 2**20,
               "gradient_as_bucket_view": model.gradient_as_bucket_view,
               "static_graph": model.static_graph}
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowSet(), batch_size=4)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.observe:
            with open(args.observe, "a") as fh:
                fh.write(json.dumps({
                    "step": step, "num_workers": loader.num_workers,
                    "pin_memory": loader.pin_memory,
                    "persistent_workers": loader.persistent_workers,
                    "autocast": SEEN.get("autocast"), "compiled": SEEN["compiling"],
                    "tf32": torch.backends.cuda.matmul.allow_tf32, "ddp": ddp}) + "\n")
        if args.save and step % args.save_every == 0:
            torch.save({"step": step, "model": model.state_dict()}, args.save)
        if step + 1 >= args.iters:
            break


if __name__ == "__main__":
    main()
