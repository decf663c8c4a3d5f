"""What `advisor profile` costs a real training step: plain, outside the window, inside it.

    python3 benchmarks/profile_overhead.py [--config gpt-small gpt-tiny] [--window 52] [--out DIR]

For each config the same training script (this file with ``--child``: a GPT-style decoder LM,
bf16 autocast, AdamW, batches from a DataLoader) runs three times, each in a fresh process:

    plain    python3 profile_overhead.py --child ...
    outside  advisor profile --wait 100000 ...          (every hook installed, no window)
    inside   advisor profile --wait W --steps K ...     (the measured steps are recorded)

The script times the same block of iterations in all three runs: CUDA synchronised at both
ends of the block, mean step time = block wall time / iterations. Inside, the block is the
window less its first and last step (those carry the profiler's start, and its stop and trace
export, reported apart as one-time costs). Prints a Markdown table; writes DIR/overhead.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]

CONFIGS = {
    # name: (layers, d_model, heads, seq, batch, vocab)
    "gpt-small": (8, 1024, 16, 1024, 8, 8192),
    "gpt-tiny": (2, 256, 4, 128, 8, 4096),
}
WAIT = 8  # steps before the window in the "inside" run (and iterations of warm-up for all)


# ----- the training script -----------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    layers, d, heads, seq, batch, vocab = CONFIGS[args.config]
    torch.manual_seed(0)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(seq, d))
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.emb(idx) + self.pos
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    tokens = torch.randint(0, vocab, (64 * batch, seq + 1))
    loader = DataLoader(TensorDataset(tokens), batch_size=batch, shuffle=True, drop_last=True,
                        pin_memory=dev.type == "cuda")

    def batches():
        while True:
            yield from loader

    a, b = args.block
    n = b + 2  # the window's last step (iteration b) must end inside the run
    after = []  # host time after each iteration's optimizer step
    marks = {}
    it = batches()
    for i in range(n):
        (xy,) = next(it)
        xy = xy.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(xy[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), xy[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        after.append(time.perf_counter())
        if i + 1 in (a, b):  # the block is iterations a .. b-1
            if dev.type == "cuda":
                torch.cuda.synchronize()
            marks[i + 1] = time.perf_counter()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    per_iter = [(y - x) * 1e3 for x, y in itertools.pairwise(after)]  # iteration i+1's host time
    result = {
        "config": args.config,
        "block": [a, b],
        "step_ms": (marks[b] - marks[a]) * 1e3 / (b - a),
        "host_iter_ms": per_iter,
        "end": time.time(),
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }
    Path(args.result).write_text(json.dumps(result))


# ----- the driver --------------------------------------------------------------------------------


def run_mode(mode: str, config: str, window: int, out: Path) -> dict:
    a, b = WAIT + 2, WAIT + window  # inside: iterations W+1 .. W+K are the window's steps
    result = out / f"{config}-{mode}.json"
    script = [str(HERE), "--child", "--config", config, "--block", str(a), str(b),
              "--result", str(result)]
    advisor = [sys.executable, "-m", "advisor.cli", "profile", "-q", "--out",
               str(out / f"{config}-{mode}")]
    cmd = {
        "plain": [sys.executable, *script],
        "outside": [*advisor, "--wait", "100000", *script],
        "inside": [*advisor, "--wait", str(WAIT), "--steps", str(window), "--json",
                   str(out / f"{config}-inside-report.json"), *script],
    }[mode]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    t_end = time.time()
    # The script's own timings are written before advisor analyses; outside, advisor exits 2
    # (the window was never reached: nothing to analyse).
    expected = 2 if mode == "outside" else 0
    if done.returncode != expected:
        sys.stderr.write(f"{config}/{mode}: exit {done.returncode}\n{done.stderr[-2000:]}\n")
    if not result.exists():
        raise SystemExit(f"{config}/{mode} failed with {done.returncode}")
    r = json.loads(result.read_text())
    r["mode"], r["wall_s"], r["after_script_s"] = mode, t_end - t0, t_end - r["end"]
    if mode == "inside":
        host = r["host_iter_ms"]  # host[j] = iteration j+1
        before = statistics.median(host[1:WAIT - 2])  # iterations 2 .. W-2, no profiler yet
        inside = statistics.median(host[a:b])
        # Iterations W-1 and W end with the profiler's prepare and start; W+K with its stop
        # and the trace export.
        r["window_start_ms"] = host[WAIT - 2] + host[WAIT - 1] - 2 * before
        r["window_stop_ms"] = host[WAIT + window - 1] - inside
        report_path = out / f"{config}-inside-report.json"
        if report_path.exists():
            report = json.loads(report_path.read_text())
            r["steps_recorded"] = report["steps"]["count"]
            r["phases"] = list(report["steps"]["phases"])
    return r


def table(results: list[dict]) -> str:
    rows = ["| config | run | mean step (ms) | vs plain | notes |",
            "| --- | --- | ---: | ---: | --- |"]
    for config in dict.fromkeys(r["config"] for r in results):
        rs = {r["mode"]: r for r in results if r["config"] == config}
        base = rs["plain"]["step_ms"]
        for mode, label in (("plain", "`python script.py`"),
                            ("outside", "`advisor profile`, outside the window"),
                            ("inside", "`advisor profile`, inside the window")):
            r = rs[mode]
            note = ""
            if mode == "inside":
                note = (f"one-time: start {r['window_start_ms']:.0f} ms, stop + trace export "
                        f"{r['window_stop_ms'] / 1e3:.1f} s; analysis after the script "
                        f"{r['after_script_s']:.1f} s")
            delta = "" if mode == "plain" else f"{(r['step_ms'] / base - 1) * 100:+.2f}%"
            rows.append(f"| {config} | {label} | {r['step_ms']:.3f} | {delta} | {note} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--block", type=int, nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--config", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--window", type=int, default=52,
                    help="steps recorded in the inside run; the block is this less 2")
    ap.add_argument("--out", type=Path, default=Path("overhead-out"))
    args = ap.parse_args()
    if args.child:
        args.config = args.config[0]
        child(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for config in args.config:
        for mode in ("plain", "outside", "inside"):
            r = run_mode(mode, config, args.window, args.out)
            print(f"{config:10s} {mode:8s} {r['step_ms']:8.3f} ms/step  ({r['wall_s']:.0f} s)",
                  file=sys.stderr, flush=True)
            results.append(r)
    for r in results:
        r.pop("host_iter_ms", None)
    (args.out / "overhead.json").write_text(json.dumps(results, indent=1))
    print(f"\n{results[0]['gpu']}, torch {results[0]['torch']}, {args.window - 2} steps "
          f"per block\n")
    print(table(results))


if __name__ == "__main__":
    main()
