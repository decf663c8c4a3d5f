"""A tiny real training loop that does, at one iteration, something a real job may do to its
process: fork, exec a child, chdir, close its standard streams, replace advisor's output
directory, or swallow every exception with a bare ``except:`` while it is sent SIGTERM.

`tests/capture/test_job_behaviour.py` runs it under plain ``python`` and under ``advisor
profile`` and compares what the job did (exit status, output, files).

Usage: python behaves.py [--iters N] [--at STEP] ACTION [ARG]
"""

import argparse
import os
import signal
import subprocess
import sys

import torch
from torch import nn


def act(action: str, arg: str | None) -> None:
    """Do the action (at the chosen iteration)."""
    if action == "fork":
        pid = os.fork()
        if pid == 0:  # the child leaves as a script does: sys.exit (torch work after a fork
            # with live intra-op threads may hang under plain python too)
            print("child: done", flush=True)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print(f"parent: child status {os.waitstatus_to_exitcode(status)}", flush=True)
    elif action == "fork-train":
        pid = os.fork()
        if pid == 0:  # the child trains on (one intra-op thread: see the test's environment)
            for _ in range(6):
                step()
            print("child: trained", flush=True)
            sys.exit(3)
        _, status = os.waitpid(pid, 0)
        print(f"parent: child status {os.waitstatus_to_exitcode(status)}", flush=True)
    elif action == "fork-exec":
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, "-c", "print('exec child: ok')"])
        _, status = os.waitpid(pid, 0)
        print(f"parent: exec child status {os.waitstatus_to_exitcode(status)}", flush=True)
    elif action == "subprocess":
        out = subprocess.run([sys.executable, "-c", "import os; print(sorted(k for k in "
                              "os.environ if 'ADVISOR' in k))"], capture_output=True, text=True)
        print(f"subprocess: {out.returncode} {out.stdout.strip()}", flush=True)
    elif action == "chdir":
        os.chdir(arg or "/")
    elif action == "close-std":
        sys.stdout.flush()
        sys.stderr.flush()
        os.close(1)
        os.close(2)
        global quiet
        quiet = True
    elif action == "replace-out":
        import shutil

        shutil.rmtree(arg, ignore_errors=True)
        with open(arg, "w") as f:  # a file where advisor's directory was
            f.write("the job's own file\n")
    elif action == "sigterm-swallowed":
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(20):  # the signal lands before this loop ends
                step()
        except:  # noqa: E722 - the point of the test: a bare except swallows everything
            print("swallowed", flush=True)
    elif action == "sigterm-chained":  # as Lightning does: its handler, then the one it found
        found = signal.getsignal(signal.SIGTERM)

        def chained(signum, frame):
            print("own handler ran", flush=True)
            if callable(found):
                found(signum, frame)

        signal.signal(signal.SIGTERM, chained)
        os.kill(os.getpid(), signal.SIGTERM)
    elif action == "sigterm-handled":
        signal.signal(signal.SIGTERM, lambda s, f: print("own handler ran", flush=True))
        os.kill(os.getpid(), signal.SIGTERM)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
quiet = False  # the standard streams were closed: nothing more to say


def step() -> None:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=14)
    ap.add_argument("--at", type=int, default=4)
    ap.add_argument("action")
    ap.add_argument("arg", nargs="?")
    a = ap.parse_args()
    for i in range(a.iters):
        if i == a.at:
            act(a.action, a.arg)
        step()
    if not quiet:
        print(f"behaves: done {a.iters}", flush=True)


if __name__ == "__main__":
    main()
