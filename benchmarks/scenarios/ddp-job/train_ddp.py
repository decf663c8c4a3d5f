"""A real DDP training job on N GPUs, in the variants `advisor analyze` must tell apart.

Run with ``torchrun --nproc_per_node=N train_ddp.py --out DIR``. One launch runs every variant
(start-up and NCCL set-up are paid once), each timed WITHOUT a profiler (``--timed`` steps between
two synchronizations, the mean step on rank 0, which is the job's step since every rank waits at
the all-reduce), then profiled for a few steps with torch.profiler, one trace per rank:

* ``baseline``          as is: DataLoader with workers, DDP defaults, one micro-batch per step
* ``slow-rank``         rank 1's DataLoader has no workers: its CPU transform runs in the step
* ``slow-rank-fixed``   every rank with workers (the fix the straggler rule names)
* ``accum-sync``        4 micro-batches per step, DDP all-reduces on every one (no ``no_sync``)
* ``accum-nosync``      the same under ``model.no_sync()`` for the first 3 (the fix)
* ``tiny-bucket``       ``bucket_cap_mb=1``: many small all-reduces
* (``baseline`` is the fix for ``tiny-bucket``: DDP's default 25 MB buckets)
* ``overlap-fix``       the baseline with exposed-communication's overlap snippet: 100 MB buckets,
                        ``gradient_as_bucket_view=True``, ``static_graph=True``

A GPT-like decoder stack (``nn.TransformerEncoderLayer``, causal mask) on synthetic tokens:
nothing to download. ``--device cpu`` runs the same code on gloo for a smoke test.

``--capture nsys`` is the run to launch under ``nsys profile``: no torch.profiler, each of the
``--profiled`` steps an NVTX range ``step k`` (warm-up steps unnamed, so only those are steps)
with NVTX phase ranges inside, the ones ``record_function`` gives torch.profiler.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import json
import multiprocessing as mp
import os
import shutil
import tarfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function, schedule


class Tokens(torch.utils.data.Dataset):
    """Synthetic token windows with a CPU transform per sample (a tokenizer's worth of work)."""

    def __init__(self, n: int, seq: int, vocab: int, work: int) -> None:
        self.n, self.seq, self.vocab, self.work = n, seq, vocab, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        rng = np.random.default_rng(i)
        x = rng.integers(0, self.vocab, self.seq + 1)
        for _ in range(self.work):  # CPU work per sample, like decoding/augmenting real data
            x = (x * 1103515245 + 12345) % self.vocab
        t = torch.from_numpy(x.astype(np.int64))
        return t[:-1], t[1:]


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]]
        h = self.blocks(h, mask=self.mask[: x.shape[1], : x.shape[1]], is_causal=True)
        return self.head(h)


VARIANTS = {
    # name: (slow rank or None, micro-batches per step, no_sync, bucket_cap_mb)
    "baseline": (None, 1, False, 25.0),
    "slow-rank": (1, 1, False, 25.0),
    "slow-rank-fixed": ("fixed", 1, False, 25.0),
    "accum-sync": (None, 4, False, 25.0),
    "accum-nosync": (None, 4, True, 25.0),
    "tiny-bucket": (None, 1, False, 1.0),
    # the baseline with exposed-communication's overlap fix applied as its snippet writes it
    "overlap-fix": (None, 1, False, 100.0),
}


def batches(loader):
    while True:
        yield from loader


@contextlib.contextmanager
def mark(name: str, nvtx: bool):
    """A phase or step range for both profilers: record_function (torch.profiler) and, under
    nsys, an NVTX range of the same name."""
    with record_function(name):
        if nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if nvtx:
                torch.cuda.nvtx.range_pop()


def run_variant(name, args, rank, world, device, traced=True):
    slow, accum, nosync, bucket = VARIANTS[name]
    torch.manual_seed(0)
    model = GPT(args.vocab, args.dim, args.layers, args.heads, args.seq).to(device)
    overlap = name == "overlap-fix"  # gradient_as_bucket_view and static_graph too
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
              bucket_cap_mb=bucket, gradient_as_bucket_view=overlap, static_graph=overlap)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=device.type == "cuda")
    workers = 0 if slow == rank else args.workers
    ds = Tokens(200_000, args.seq, args.vocab, args.work)
    sampler = torch.utils.data.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=workers,
                                         pin_memory=device.type == "cuda",
                                         persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
    it = batches(loader)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

    nvtx = args.capture == "nsys" and device.type == "cuda"

    def step():
        for m in range(accum):
            with mark("data", nvtx):
                x, y = next(it)
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            sync_ctx = ddp.no_sync() if nosync and m < accum - 1 else contextlib.nullcontext()
            with sync_ctx:
                with mark("forward", nvtx), amp:
                    logits = ddp(x)
                with mark("loss", nvtx), amp:
                    loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten()) / accum
                with mark("backward", nvtx):
                    loss.backward()
        with mark("optimizer", nvtx):
            opt.step()
            opt.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
        dist.barrier()

    for _ in range(args.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.timed):
        step()
    sync()
    mean_ms = (time.perf_counter() - t0) / args.timed * 1e3 if args.timed else float("nan")
    if not traced:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return mean_ms
    if args.capture == "nsys":  # nsys records the whole process: name the steps it should analyse
        for k in range(args.profiled):
            with mark(f"step {k}", nvtx):
                step()
        sync()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return mean_ms
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    trace_dir = Path(args.out) / name
    trace_dir.mkdir(parents=True, exist_ok=True)
    with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=args.profiled),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace_dir / f"rank{rank}.json"))) as prof:
        for _ in range(args.profiled + 2):
            step()
            prof.step()
    raw = trace_dir / f"rank{rank}.json"
    with raw.open("rb") as src, gzip.open(f"{raw}.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    sync()
    if rank == 0 and args.pack:  # both ranks' traces of this variant in one file (few files come back)
        Path(args.pack).mkdir(parents=True, exist_ok=True)
        with tarfile.open(Path(args.pack) / f"{name}.tar", "w") as tar:
            for r in range(world):
                tar.add(trace_dir / f"rank{r}.json.gz", arcname=f"{name}/rank{r}.json.gz")
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return mean_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--pack", help="also write <variant>.tar of all ranks' traces here")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--work", type=int, default=300, help="CPU transform passes per sample")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--profiled", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1,
                    help="time the variants this many times, in turn (traced only the first time): "
                         "host-bound steps move between runs; measured.json keeps every run and "
                         "their median")
    ap.add_argument("--capture", choices=("torch", "nsys"), default="torch",
                    help="torch: time each variant, then trace it with torch.profiler; nsys: the "
                         "profiled steps as NVTX ranges, to run under `nsys profile`")
    args = ap.parse_args()
    backend = "nccl" if args.device == "cuda" else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    runs: dict[str, list[float]] = {}
    for rep in range(max(1, args.repeats)):  # in turn, so a drift of the host hits every variant
        for name in args.variants.split(","):
            runs.setdefault(name, []).append(run_variant(name, args, rank, world, device, traced=rep == 0))
            # the variant's model, DDP reducer and DataLoader workers go before the next one starts:
            # a previous variant's live workers would compete for the host this one is bound by
            gc.collect()
            if rank == 0 and args.capture == "torch":
                print(f"{name}: {runs[name][-1]:.2f} ms per step (unprofiled, mean of {args.timed}, "
                      f"run {rep + 1}; {len(mp.active_children())} child processes left)", flush=True)
                meta = {"world_size": world, "torch": torch.__version__, "args": vars(args),
                        "step_ms": {k: float(np.median(v)) for k, v in runs.items()},
                        "step_ms_runs": runs,
                        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"}
                for where in {args.out, args.pack or args.out}:
                    Path(where, "measured.json").write_text(json.dumps(meta, indent=2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
