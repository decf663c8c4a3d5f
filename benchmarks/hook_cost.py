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

    python benchmarks/hook_cost.py --parts [--rounds 15] [--calls 2000]

The hooks' host cost per step, part by part, in microseconds of the loop thread's CPU time
(``time.thread_time_ns``: other processes on a shared machine do not count in it): each entry
point a training step goes through once (the top-level module's call, ``autograd.backward``,
``optimizer.step()`` with the step boundary it makes, a DataLoader's ``__next__``) is called
``--calls`` times on a trivial payload, in blocks alternating with and without a session
installed (past its discovery steps, pinned window never reached, as outside the window); the
cost is the median of the hooked blocks less the median of the plain ones. Then a whole
launch-bound step (``tiny-gpt``: a 4-layer GPT of width 32, batch 2, sequence 16, AdamW
unfused: about 970 top-level operators, 3,200 with the nested ones, a few ms per step on a
CPU) with and without the hooks, the same way: a check that the parts miss nothing large, good
only to the whole step's noise (a few % on the shared development machine).
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
    ap.add_argument("--parts", action="store_true", help="the hooks' cost per step, part by part")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    if a.parts:
        return parts(a)
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


def _session():
    """A session as `advisor profile --wait <past the end>` installs it, past its discovery."""
    from advisor.capture import session
    from advisor.capture.window import KinetoRecorder

    return session.Session(session.WindowPlan(wait=10**9, steps=1), KinetoRecorder(None))


def _interleaved(fn, train_step, rounds: int, calls: int) -> tuple[float, float]:
    """Median thread-CPU ns per call of ``fn``: plain blocks and hooked blocks, alternating (the
    order flips every round); each hooked block gets a fresh session that first runs
    ``train_step`` past the discovery steps, as a real run does before its steady steps."""
    from advisor.capture import session

    clock = time.thread_time_ns

    def timed() -> float:
        for _ in range(session.DISCOVERY_STEPS + 2):  # both kinds of block: the same warm-up
            train_step()
        t = clock()
        for _ in range(calls):
            fn()
        return (clock() - t) / calls

    def hooked() -> float:
        sess = _session()
        sess.install()
        session.activate(sess)
        try:
            return timed()
        finally:
            sess.uninstall()
            session.activate(None)

    plain, hook = [], []
    timed()  # warm-up
    for k in range(rounds):
        if k % 2:
            hook.append(hooked())
            plain.append(timed())
        else:
            plain.append(timed())
            hook.append(hooked())
    return statistics.median(plain), statistics.median(hook)


def tiny_gpt(torch, nn):
    """A launch-bound step of many small operators: the shape of nanoGPT's character model
    (pre-norm blocks, causal attention, GELU MLP, AdamW), scaled down so a CPU runs it in ms."""
    d, heads, seq, layers, vocab = 32, 2, 16, 4, 65

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x))
            return nn.functional.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False, fused=False)
    idx = torch.randint(0, vocab, (2, seq))

    def step() -> None:
        loss = model(idx, idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def parts(a) -> int:
    """The hooks' host cost per step, part by part (see the module docstring)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the loop thread's CPU time is the step's host time
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, foreach=False)
    x = torch.randn(1, 2)
    model(x).sum().backward()
    grad = torch.ones((), requires_grad=True)
    loader = DataLoader(TensorDataset(torch.zeros(10**7, 1)), batch_size=1)
    it = iter(loader)

    def train_step() -> None:
        next(it)
        model(x).sum().backward()
        opt.step()

    rows = [("top-level module call (pre + post hook)", lambda: model(x)),
            ("autograd.backward (wrapper)", lambda: torch.autograd.backward(grad)),
            ("optimizer.step() (pre + post hook, step boundary)", opt.step),
            ("DataLoader __next__ (wrapper)", lambda: next(it))]
    print(f"torch {torch.__version__}, {a.rounds} rounds of {a.calls} calls, thread CPU time")
    print("| part (once per step) | plain (us) | with hooks (us) | cost (us) |")
    print("| --- | ---: | ---: | ---: |")
    total = 0.0
    for name, fn in rows:
        p, h = _interleaved(fn, train_step, a.rounds, a.calls)
        total += h - p
        print(f"| {name} | {p / 1e3:.2f} | {h / 1e3:.2f} | {(h - p) / 1e3:+.2f} |")
    print(f"| **sum per step** | | | **{total / 1e3:+.2f}** |")
    step = tiny_gpt(torch, nn)
    step()
    p, h = _interleaved(step, step, max(5, a.rounds // 2), max(20, a.calls // 50))
    print(f"tiny-gpt step: plain {p / 1e3:.1f} us, with hooks {h / 1e3:.1f} us, "
          f"difference {(h - p) / 1e3:+.1f} us ({(h - p) / p:+.2%})")
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
