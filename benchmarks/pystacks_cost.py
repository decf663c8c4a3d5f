"""What advisor's Python-stack sampler (`advisor.capture.pystacks`) costs a launch-bound step.

    python benchmarks/pystacks_cost.py [--blocks 12] [--steps 40] [--hz 1000]

Under ``advisor profile --nsys`` the sampler runs only while the window records; there, every
microsecond it takes from the training thread (the moments it holds the GIL to read the stack)
is step time on a launch-bound loop. This runs one real training loop (a narrow 48-block MLP:
hundreds of operators per step, autograd, a for-loop SGD, batches from a DataLoader) and
alternates blocks of steps with the sampler on and off, so drift and noise fall on both alike.
Prints the median step of each, the difference, the samples taken per step, the stack depth and
the sampler thread's own CPU time per sample (`StackSampler.cpu_ns`): on a loaded machine the
step difference is noisy, while the per-sample CPU time bounds what the job can lose to it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main() -> int:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from advisor.capture.pystacks import StackSampler

    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--hz", type=float, default=1000.0)
    ap.add_argument("--keep-switch-interval", action="store_true",
                    help="leave the interpreter's switch interval at its default while sampling")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = []
    for _ in range(48):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers)
    crit = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)
    loader = DataLoader(TensorDataset(torch.randn(4096, 32), torch.randn(4096, 32)),
                        batch_size=16)

    def block(n: int) -> list[float]:
        times = []
        it = iter(loader)
        last = time.perf_counter_ns()
        for _ in range(n):
            xb, yb = next(it)
            opt.zero_grad(set_to_none=True)
            crit(model(xb), yb).backward()
            opt.step()
            now = time.perf_counter_ns()
            times.append((now - last) / 1e3)
            last = now
        return times

    block(a.steps)  # warm-up
    plain: list[float] = []
    sampled: list[float] = []
    samples = 0
    depth = 0
    cpu_ns = 0

    def sampled_block() -> list[float]:
        nonlocal samples, depth, cpu_ns
        s = StackSampler(interval_s=1.0 / a.hz,
                         **({"switch_interval_s": None} if a.keep_switch_interval else {}))
        s.start()
        try:
            return block(a.steps)
        finally:
            s.stop()
            samples += len(s.times)
            cpu_ns += s.cpu_ns
            depth = max([depth, *(len(st) for st in s.stacks)])

    ratios = []  # sampled / plain median of each adjacent pair of blocks
    for k in range(a.blocks):  # the order alternates: neither always runs second
        if k % 2:
            one = sampled_block()
            two = block(a.steps)
            sampled += one
            plain += two
        else:
            two = block(a.steps)
            one = sampled_block()
            plain += two
            sampled += one
        ratios.append(statistics.median(one) / statistics.median(two))
    p, s = statistics.median(plain), statistics.median(sampled)
    print(f"cpu, torch {torch.__version__}, Python {sys.version.split()[0]}; {len(plain)} steps "
          f"each; sampler at {a.hz:g} Hz: {samples / len(sampled):.1f} samples per step, "
          f"stacks up to {depth} frames deep")
    print(f"median step: plain {p:.1f} us, sampled {s:.1f} us, difference {s - p:+.1f} us "
          f"({(s - p) / p:+.2%})")
    q = statistics.quantiles(ratios, n=4)
    print(f"per pair of adjacent blocks, sampled/plain: median {statistics.median(ratios) - 1:+.2%}"
          f", quartiles {q[0] - 1:+.2%} .. {q[2] - 1:+.2%} ({len(ratios)} pairs)")
    for d, us in walk_cost():
        print(f"one sample's stack read at depth {d}: {us:.1f} us (sys._current_frames + walk)")
    per = cpu_ns / max(1, samples) / 1e3
    print(f"sampler thread CPU: {per:.1f} us per sample, {per * a.hz / 1e4:.2f}% of a core at "
          f"{a.hz:g} Hz (while it runs it holds the GIL: the training thread's share of it)")
    return 0


def walk_cost() -> list[tuple[int, float]]:
    """What one sample does while it holds the GIL, timed alone at a few stack depths (a
    training step's stack is 30-80 frames deep under nn.Module nesting and a framework)."""
    import threading
    import timeit

    from advisor.capture.pystacks import stack_frames

    me = threading.get_ident()

    def one() -> None:  # what `StackSampler._sample` does per sample
        entries = stack_frames(sys._current_frames().get(me))
        tuple((id(c), line) for c, line in entries)

    def at(depth: int) -> float:
        if depth > 0:
            return at(depth - 1)
        return timeit.timeit(one, number=5000) / 5000 * 1e6

    return [(d, at(d)) for d in (12, 40, 80)]


if __name__ == "__main__":
    sys.exit(main())
