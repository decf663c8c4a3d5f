"""`advisor profile --nsys`: the same window, recorded by Nsight Systems instead of torch.profiler.

The script runs in a child (``python -m advisor.capture --nsys-child ...``) under ``nsys profile
--capture-range=cudaProfilerApi``; the child marks steps and phases with NVTX and calls
cudaProfilerStart/Stop at the window's edges, then writes a status file (exit code, steps that
completed). This process exports the report to SQLite and analyses that.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from advisor.capture.options import DEFAULT_TRACE, STATUS_NAME
from advisor.errors import CaptureError

PROFILE_FLAGS = (
    "--sample=none", "--cpuctxsw=none",  # not every kernel lets nsys sample; tracing is enough
    "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
)


def find_nsys() -> str:
    path = shutil.which("nsys")
    if path is None:
        raise CaptureError("--nsys needs Nsight Systems (nsys) on PATH; install it (it also "
                           "ships inside Nsight Compute and the CUDA toolkit) or drop --nsys to "
                           "record with torch.profiler")
    return path


def profile_command(nsys: str, base: Path, child: list[str],
                    trace: str = DEFAULT_TRACE, options: tuple[str, ...] = ()) -> list[str]:
    # No --python-backtrace by default: nsys takes Python backtraces through its CPU sampler,
    # which --sample=none turns off (with it, a capture records no backtraces). An option the
    # user gives (--nsys-option=--sample=process-tree) replaces ours of the same name: nsys
    # refuses an option given twice.
    given = {option.split("=", 1)[0] for option in options}
    ours = [flag for flag in PROFILE_FLAGS if flag.split("=", 1)[0] not in given]
    return [nsys, "profile", "-t", trace, *ours, *options, "-o", str(base), "-f", "true", *child]


def child_command(opts, target, args: list[str]) -> list[str]:
    own = ["--nsys-child", *(["--wait", str(opts.wait)] if opts.wait is not None else []),
           *(["--window-at", f"{opts.window_at_s:g}s"] if opts.window_at_s is not None else []),
           "--steps", str(opts.steps), "--out", str(opts.out), "--then", opts.then]
    if opts.quiet:
        own.append("--quiet")
    own.append("--stacks" if opts.stacks else "--no-stacks")  # the child's default is off
    tgt = ["-m", target.name] if target.module else [target.name]
    return [sys.executable, "-m", "advisor.capture", *own, *tgt, *args]


def profile(opts, target, args: list[str], rank) -> int:
    from advisor.capture.after_window import finish
    from advisor.capture.background import BackgroundAnalysis
    from advisor.capture.reporting import report, why_nothing

    nsys = find_nsys()
    import torch

    if not torch.cuda.is_available():
        raise CaptureError("--nsys records the window with the CUDA profiler API and needs a "
                           "CUDA GPU; without one, drop --nsys (torch.profiler records CPU traces)")
    base = opts.out / f"nsys_{rank.tag}"
    rep, sqlite = base.with_suffix(".nsys-rep"), base.with_suffix(".sqlite")
    status_path = opts.out / STATUS_NAME.format(rank=rank.rank)
    for stale in (rep, sqlite, status_path):
        stale.unlink(missing_ok=True)
    bg = BackgroundAnalysis(opts, rank, sqlite)
    proc = subprocess.Popen(profile_command(nsys, base, child_command(opts, target, args),
                                            opts.nsys_trace, opts.nsys_options))
    if opts.then == "continue":
        _hand_over_while_running(proc, nsys, rep, sqlite, status_path, bg)
    rc = _wait(proc)
    try:
        status = json.loads(status_path.read_text())
    except (OSError, ValueError):
        status = None
    if status is None or status.get("exit_code") is None:
        raise CaptureError(f"the script did not run under nsys (nsys exited with {rc}); "
                           "see its messages above")
    code = int(status["exit_code"])
    if bg.started:
        done = finish(bg, status, code, opts)
        if done is not None:
            return done
    if not rep.exists():
        msg = why_nothing(opts, status["complete"], status["explicit"],
                                 status["optimizer_steps"], status["skipped_reason"], None, code)
        if not status["window_started"] or not status["recorded"]:
            if code != 0:
                print(f"advisor: {msg}", file=sys.stderr)
                return code
            raise CaptureError(msg)
        raise CaptureError(f"nsys wrote no report ({rep}); see its messages above")
    if not sqlite.exists():
        done = export(nsys, rep, sqlite)
        if done.returncode != 0 or not sqlite.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise CaptureError(f"nsys export failed for {rep}: {' / '.join(tail)}")
    return report(opts, rank, sqlite, code, status["recorded"], status["complete"], status)


def export(nsys: str, rep: Path, sqlite: Path, nice: bool = False) -> subprocess.CompletedProcess:
    cmd = [nsys, "export", "--type", "sqlite", "-o", str(sqlite), "-f", "true", str(rep)]
    if nice and shutil.which("nice"):
        cmd = ["nice", "-n", "10", *cmd]  # beside the job: its cores come first
        if shutil.which("chrt"):  # and only CPUs nothing else wants (background.step_aside)
            cmd = ["chrt", "--idle", "0", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True)


def _wait(proc: subprocess.Popen) -> int:
    """Wait for nsys; a Ctrl-C reaches the script too (same process group), which handles it:
    keep waiting for its clean-up and its status."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def _hand_over_while_running(proc, nsys: str, rep: Path, sqlite: Path, status_path: Path,
                             bg) -> None:
    """While the job runs under nsys: once the child says the window has closed and nsys has
    written its report (``--capture-range-end=stop`` ends the collection with the window),
    export it and start the analysis beside the job. Returns when handed over or the job ends."""
    import time

    last_size = -1
    tries = 0
    while proc.poll() is None:
        try:
            time.sleep(0.5)
        except KeyboardInterrupt:
            return
        try:
            status = json.loads(status_path.read_text())
        except (OSError, ValueError):
            continue
        if not status.get("window_done") or not status.get("recorded") or not rep.exists():
            continue
        size = rep.stat().st_size
        if size != last_size:  # still being written
            last_size = size
            continue
        done = export(nsys, rep, sqlite, nice=True)
        if done.returncode == 0 and sqlite.exists():
            bg.start(status)
            return
        sqlite.unlink(missing_ok=True)
        tries += 1
        if tries >= 3:
            return  # exported when the job ends, as without the handover
