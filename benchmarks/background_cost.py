"""What the analysis beside the job costs the job's steps, and how early its reports come.

    python benchmarks/background_cost.py run [--seconds 60] [--out DIR]   # CPU or GPU machine
    python benchmarks/background_cost.py report ADVISOR_OUT [ADVISOR_OUT ...]

``run`` trains `tests/capture/scripts/train_for.py` (a real MLP loop on a DataLoader) for
``--seconds`` twice, plain and under ``advisor profile --then continue`` (the default without a
terminal), each logging its own step times, then prints ``report``'s table for the second run
with the plain run's median beside it. ``report`` reads what any `advisor profile` run left in
its ``--out`` folder: the analysis's status (``background_rank0.json``: when it started, when the
reports were written) and the session's step clock (``steps_rank0.json``, host clock at each
step boundary, wall-clock aligned), and compares the job's steps while the analysis ran with
its steps after it (the window and the steps next to it left out).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRIPT = ROOT / "tests" / "capture" / "scripts" / "train_for.py"
sys.path.insert(0, str(ROOT))

from tests.capture.step_clock_data import _median_ms, measure  # noqa: E402


def table(rows: list[tuple[str, dict, float | None]]) -> None:
    print("| run | window closed -> reports (s) | analysis (s) | job ran on after reports (s) | "
          "step while analysing (ms, n) | step after (ms, n) | difference | plain run (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, m, plain in rows:
        d, a = m["during_ms"], m["after_ms"]
        diff = f"{(d - a) / a:+.1%}" if d and a else "–"
        f = lambda v, p=2: "–" if v is None else f"{v:.{p}f}"  # noqa: E731
        print(f"| {name} | {f(m['window_closed_to_reports_s'], 1)} | {f(m['analysis_s'], 1)} | "
              f"{f(m['job_ran_on_after_reports_s'], 1)} | {f(d, 3)} ({m['steps_during']}) | "
              f"{f(a, 3)} ({m['steps_after']}) | {diff} | {f(plain, 3)} |")


def _own_log_median(path: Path, skip: int = 20) -> float | None:
    vals = [float(line.split()[1]) for line in path.read_text().splitlines()[skip:]]
    return _median_ms(vals)


def run(a: argparse.Namespace) -> int:
    work = a.out or Path(tempfile.mkdtemp(prefix="bgcost-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    args = [str(SCRIPT), "--seconds", str(a.seconds), "--width", str(a.width)]
    plain_log, prof_log = work / "plain.log", work / "profiled.log"
    for p in (plain_log, prof_log):
        p.unlink(missing_ok=True)
    t = time.time()
    subprocess.run([sys.executable, *args, "--log", str(plain_log)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    print(f"plain run: {time.time() - t:.1f} s", file=sys.stderr)
    out = work / "advisor-out"
    t = time.time()
    subprocess.run([sys.executable, "-m", "advisor.cli", "profile", "-q", "--then", "continue",
                    "--out", str(out), "--json", str(work / "r.json"), *args, "--log",
                    str(prof_log)], env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"profiled run: {time.time() - t:.1f} s", file=sys.stderr)
    table([(f"train_for.py --width {a.width}, {a.seconds:g} s", measure(out),
            _own_log_median(plain_log))])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--seconds", type=float, default=60.0)
    r.add_argument("--width", type=int, default=256)
    r.add_argument("--out", type=Path, default=None)
    p = sub.add_parser("report")
    p.add_argument("outs", type=Path, nargs="+")
    a = ap.parse_args()
    if a.cmd == "run":
        return run(a)
    table([(str(o), measure(o), None) for o in a.outs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
