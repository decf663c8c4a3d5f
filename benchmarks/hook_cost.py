"""What `advisor profile`'s hooks cost a host-bound step outside the recorded window.

    python benchmarks/hook_cost.py [--blocks 12] [--steps 50] [--device cpu|cuda]

On a launch-bound step every microsecond the host spends is step time, so the hooks' host cost
per step is their whole cost. This runs one real training loop (a narrow 48-block MLP: hundreds
of operators per step with autograd and a for-loop SGD, batches from a DataLoader) in one
process and alternates blocks of steps with the session's hooks installed (no window: ``--wait``
pinned past the end, as outside the window) and with none, so drift and noise fall on both alike.
Each block's first steps (the hooks' one-time discovery of the top-level modules) are left
out of both. Prints the median step of each, the difference per step, and the cost of the settle check the
session makes at each boundary before the window (a bound on the steps before it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit


def main() -> int:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from advisor.capture import capture_state, session
    from advisor.capture.settle import settled
    from advisor.capture.window import KinetoRecorder

    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    layers = []
    for _ in range(48):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev)
    crit = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)
    data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 32))
    loader = DataLoader(data, batch_size=16)

    def block(n: int) -> list[float]:
        times = []
        it = iter(loader)
        last = time.perf_counter_ns()
        for _ in range(n):
            xb, yb = next(it)
            xb, yb = xb.to(dev), yb.to(dev)
            opt.zero_grad(set_to_none=True)
            crit(model(xb), yb).backward()
            opt.step()
            now = time.perf_counter_ns()
            times.append((now - last) / 1e3)
            last = now
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return times

    block(a.steps)  # warm-up
    skip = session.DISCOVERY_STEPS + 2  # each session looks for the top modules first
    plain, hooked = [], []
    def hooked_block() -> list[float]:
        # a fresh session per block, installed once, as `advisor profile` does for a run
        sess = session.Session(capture_state.WindowPlan(wait=10**9, steps=1), KinetoRecorder(None))
        sess.install()
        session.activate(sess)
        try:
            return block(a.steps)[skip:]
        finally:
            sess.uninstall()
            session.activate(None)

    for k in range(a.blocks):  # the order alternates too: neither always runs second
        if k % 2:
            hooked += hooked_block()
            plain += block(a.steps)[skip:]
        else:
            plain += block(a.steps)[skip:]
            hooked += hooked_block()
    p, h = statistics.median(plain), statistics.median(hooked)
    after = after_a_window(block, a, skip)
    ops = len(layers) * 2 + 8  # forward, backward and update operators per step, at least
    history = [1000.0 + i for i in range(40)]
    check_us = timeit.timeit(lambda: settled(history), number=2000) / 2000 * 1e6
    print(f"device {dev}, torch {torch.__version__}; {len(plain)} steps each, "
          f"> {ops} operators per step")
    print(f"median step: plain {p:.1f} us, with hooks (outside the window) {h:.1f} us, "
          f"difference {h - p:+.1f} us ({(h - p) / p:+.2%})")
    print(f"settle check per boundary before the window: {check_us:.1f} us")
    if after is not None:
        before, later = after
        print(f"after a torch.profiler window (what stays set up once it stopped): plain steps "
              f"{before:.1f} us before it, {later:.1f} us after it ({(later - before) / before:+.2%})")
    return 0


def after_a_window(block, a, skip: int) -> tuple[float, float] | None:
    """Plain steps before and after one recorded window (torch.profiler, as `advisor profile`
    records it): CUPTI and Kineto may stay set up after the profiler stops, which would slow
    every later step of the job. Same process, blocks of the same loop on each side."""
    import tempfile
    from pathlib import Path

    from advisor.capture.window import KinetoRecorder

    before = []
    for _ in range(max(2, a.blocks // 2)):
        before += block(a.steps)[skip:]
    rec = KinetoRecorder(Path(tempfile.mkdtemp()) / "trace.json.gz")
    try:
        rec.prepare()
        rec.start()
        block(8)
        rec.stop([])
    except Exception as e:  # a broken profiler setup: say so, measure nothing
        print(f"no window recorded: {type(e).__name__}: {e}")
        return None
    later = []
    for _ in range(max(2, a.blocks // 2)):
        later += block(a.steps)[skip:]
    return statistics.median(before), statistics.median(later)


if __name__ == "__main__":
    sys.exit(main())
