"""What `advisor profile` costs a real, unmodified training script, from the script's own log.

    python benchmarks/real_script_ab.py [--pairs 3] [--from-iter 100] [--regex RE]
        [--variant NAME=ADVISOR_ARGS]... [--cwd DIR] -- SCRIPT [SCRIPT_ARGS]...

Runs the script plain (``python SCRIPT ARGS``) and under ``advisor profile`` (once per variant),
interleaved: A B1 B2 .. then again, at least three rounds, the order reversed every other round,
so a machine that drifts (thermals, other jobs) falls on both alike. Each run's iteration times
are parsed from the script's own stdout with ``--regex`` (named groups ``iter`` and ``ms``; the
default reads nanoGPT's ``iter 100: loss 2.1, time 21.39ms, mfu ...``), and only iterations from
``--from-iter`` on are kept: after the recorded window, where the job runs on unprofiled. Prints
one row per run and a table per variant: plain mean, advisor mean, overhead % (of the pooled
means), and the spread of the per-round overheads (min..max), with the per-round plain-vs-plain
spread beside it as the noise floor.

Default variants: ``hooks`` (``--wait 1000000``: every hook installed, never a window),
``window`` (the default window, then ``--then continue``: the analysis runs beside the job) and
``window-analysis-at-end`` (the same, the analysis after the job: what the analysis beside the
job costs it is the difference). A variant's leading ``NAME=VALUE`` words are environment
variables (``--variant "cupti-kept=TEARDOWN_CUPTI=0 --then continue"``). On the H100, nanoGPT:

    cd nanoGPT && python /path/to/advisor/benchmarks/real_script_ab.py --pairs 3 \\
        --from-iter 100 -- train.py config/train_shakespeare_char.py --compile=False \\
        --max_iters=500 --log_interval=1 --eval_interval=100000 --always_save_checkpoint=False

Why from the script's log: advisor's own step clock runs inside the process it measures, so it
cannot see its own cost; the script's timer is what the user reads (issue 32: nanoGPT's log
showed 25.1 ms under advisor against 21.4 ms plain, while advisor's hook benchmark said +0.7%).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NANOGPT = r"iter (?P<iter>\d+): .*?time (?P<ms>[\d.]+)ms"
DEFAULT_VARIANTS = ("hooks=--wait 1000000 --then continue", "window=--then continue",
                    "window-analysis-at-end=ADVISOR_ANALYSIS_AT_END=1 --then continue")


@dataclass
class Run:
    variant: str  # "plain" or the variant's name
    round: int
    times_ms: list[float]
    wall_s: float
    rc: int

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times_ms) if self.times_ms else float("nan")

    def tail(self) -> str:
        """Where the mean leaves the median: the slow iterations (more than 1.5x the run's
        median) and the share of the run's time they hold above the median; p90, p99, max."""
        if len(self.times_ms) < 2:
            return "-"
        t = sorted(self.times_ms)
        med = statistics.median(t)
        slow = [x for x in t if x > 1.5 * med]
        excess = sum(x - med for x in slow) / sum(t)
        q = statistics.quantiles(t, n=100)
        return (f"median {med:.3f}, p90 {q[89]:.3f}, p99 {q[98]:.3f}, max {t[-1]:.1f} ms; "
                f"{len(slow)} slow iterations hold {excess:.1%} of the time above the median")


def parse_times(text: str, regex: re.Pattern[str], from_iter: int) -> list[float]:
    """Iteration times (ms) from a log, iterations at or after ``from_iter``."""
    out = []
    for m in regex.finditer(text):
        if int(m.group("iter")) >= from_iter:
            out.append(float(m.group("ms")))
    return out


ENV_TOKEN = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def command(variant: str, advisor_args: str, script: list[str],
            out_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and the extra environment of one run: a variant's leading
    ``NAME=VALUE`` words are environment variables (``TEARDOWN_CUPTI=0 --then continue``)."""
    if variant == "plain":
        return [sys.executable, *script], {}
    words = shlex.split(advisor_args)
    env = {}
    while words and ENV_TOKEN.match(words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    return ([sys.executable, "-m", "advisor.cli", "profile", "-q", "--out", str(out_dir),
             *words, *script], env)


def run_once(variant: str, advisor_args: str, script: list[str], regex: re.Pattern[str],
             from_iter: int, rnd: int, cwd: Path | None, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        cmd, extra = command(variant, advisor_args, script, Path(tmp) / "out")
        # GCSTAT_TAG names the run in benchmarks/public/gcstat's per-process collection log
        env = {**os.environ, **extra, "GCSTAT_TAG": f"{variant}.{rnd}"}
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=timeout)
        wall = time.perf_counter() - t0
    times = parse_times(done.stdout, regex, from_iter)
    # exit 2 with iterations parsed: advisor had nothing to analyse (the hooks variant never
    # opens a window), the script itself ran to its end
    if done.returncode not in (0, 2) or not times:
        sys.stderr.write(f"{variant} round {rnd}: exit {done.returncode}, {len(times)} "
                         f"iterations parsed\n{done.stderr[-2000:]}\n")
    return Run(variant, rnd, times, wall, done.returncode)


def spread(values: list[float]) -> str:
    return f"{min(values):+.1%}..{max(values):+.1%}" if values else "-"


def report(runs: list[Run], variants: list[str]) -> str:
    """The table: one line per variant against the plain runs of the same rounds."""
    plain = {r.round: r for r in runs if r.variant == "plain" and r.times_ms}
    rounds = sorted(plain)
    noise = [plain[b].mean / plain[a].mean - 1 for a, b in itertools.pairwise(rounds)]
    pooled_plain = [t for r in plain.values() for t in r.times_ms]
    lines = ["| run | mean (ms) | median (ms) | stdev (ms) | iterations | overhead | per-round "
             "spread |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    pm = statistics.fmean(pooled_plain)
    lines.append(f"| plain | {pm:.3f} | {statistics.median(pooled_plain):.3f} | "
                 f"{statistics.stdev(pooled_plain):.3f} | {len(pooled_plain)} | | "
                 f"{spread(noise)} (plain vs plain) |")
    for v in variants:
        mine = {r.round: r for r in runs if r.variant == v and r.times_ms}
        pooled = [t for r in mine.values() for t in r.times_ms]
        if not pooled:
            lines.append(f"| {v} | - | - | - | 0 | - | no iterations parsed |")
            continue
        per_round = [mine[k].mean / plain[k].mean - 1 for k in mine if k in plain]
        am = statistics.fmean(pooled)
        lines.append(f"| advisor {v} | {am:.3f} | {statistics.median(pooled):.3f} | "
                     f"{statistics.stdev(pooled):.3f} | {len(pooled)} | {am / pm - 1:+.1%} | "
                     f"{spread(per_round)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="rounds of plain + every variant (>= 3)")
    ap.add_argument("--from-iter", type=int, default=100,
                    help="first iteration kept (after the recorded window)")
    ap.add_argument("--regex", default=NANOGPT,
                    help="iteration lines: named groups 'iter' and 'ms' (default: nanoGPT's)")
    ap.add_argument("--variant", action="append", default=None, metavar="NAME=ADVISOR_ARGS",
                    help="an advisor profile configuration (default: hooks and window)")
    ap.add_argument("--cwd", type=Path, default=None, help="run the script from this folder")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--warmup", type=int, default=0,
                    help="plain runs first, not counted: the first process of a session on a "
                         "GPU that idled runs slower while its clocks come up")
    ap.add_argument("script", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    script = a.script[1:] if a.script[:1] == ["--"] else a.script
    if not script:
        ap.error("give the script and its arguments after --")
    if a.pairs < 3:
        ap.error("--pairs must be at least 3 (interleaved A/B needs three rounds to show noise)")
    try:
        regex = re.compile(a.regex)
    except re.error as e:
        ap.error(f"--regex: {e}")
    if not {"iter", "ms"} <= set(regex.groupindex):
        ap.error("--regex needs the named groups 'iter' and 'ms'")
    variants: dict[str, str] = {}
    for spec in a.variant or DEFAULT_VARIANTS:
        name, _, args = spec.partition("=")
        variants[name.strip()] = args
    order = ["plain", *variants]
    runs: list[Run] = []
    for w in range(a.warmup):
        r = run_once("plain", "", script, regex, a.from_iter, -1 - w, a.cwd, a.timeout)
        print(f"warm-up {w}: mean {r.mean:.3f} ms (not counted); {r.tail()}", flush=True)
    for rnd in range(a.pairs):
        for v in (order if rnd % 2 == 0 else order[::-1]):
            r = run_once(v, variants.get(v, ""), script, regex, a.from_iter, rnd, a.cwd,
                         a.timeout)
            runs.append(r)
            print(f"round {rnd} {v:>8}: mean {r.mean:.3f} ms over {len(r.times_ms)} iterations "
                  f"(wall {r.wall_s:.1f} s, exit {r.rc}); {r.tail()}", flush=True)
    print()
    print(report(runs, list(variants)))
    return 0 if all(r.rc in (0, 2) and r.times_ms for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
