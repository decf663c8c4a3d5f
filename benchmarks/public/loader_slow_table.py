"""The table of `wave5_loader_slow.sh` (issue 34): the script's own time per step at each worker
count, against what the loader model predicted from the profiled ``-j 4`` run.

    python3 parse_loader_logs.py --slow DIR    # DIR: the script's work folder (logs/, rep/)

From the logs (``DIR/logs/j<N>.log``, pytorch/examples ImageNet main.py with ``-p 1``; no
profiler): over the epochs after the first (the first holds cuDNN's first calls and the run's
first worker start), the **run's time per step** is the training iterations' ``Time`` and the
evaluations' ``Test`` time together, per training iteration: every epoch start (forks, the
fresh workers' first batches) and every evaluation's loader start are in it, as a user's run
pays them. The **settled step** is the median iteration, each epoch's first `START_STEPS` left
out; the **epoch start** is those first iterations over as many settled steps. ``wall`` is the
whole process (Python and CUDA start-up included, the same at every N).

From the profile (``DIR/rep/steps_rank0.json``, the session state of ``advisor profile ... -j
4``): the loader model's step at N workers (`advisor.engine.loader_model.predict`: the settled
supply and the restarts at N, both per step) and the persistent-workers estimate
(`advisor.capture.accounting.epoch_restarts`, against the run's time per step). From
``DIR/rep/try.json``: what ``--try`` measured of the same knobs.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from advisor.capture.accounting import epoch_restarts
from advisor.capture.steptimes import StepClock
from advisor.engine.loader_model import observe, predict

START_STEPS = 3
"""An epoch's first iterations wait for its fresh workers: the first for their start and first
batch, the next for the rest of their first round (pytorch/examples' ImageNet log, 4 and 15
workers: docs/validation.md)."""
EPOCH = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*(\d+)\]\s+Time\s+([\d.]+)")
TEST = re.compile(r"Test: \[\s*(\d+)/\s*(\d+)\]\s+Time\s+([\d.]+)")


def run_times(text: str) -> dict[str, float] | None:
    """The log's run-level and settled figures (ms), None without two epochs."""
    epoch = -1
    train: dict[int, list[float]] = {}
    test: dict[int, float] = {}
    for line in text.splitlines():
        if m := EPOCH.search(line):
            epoch = int(m[1])
            train.setdefault(epoch, []).append(float(m[4]) * 1e3)
        elif (m := TEST.search(line)) and epoch >= 0:
            test[epoch] = test.get(epoch, 0.0) + float(m[3]) * 1e3
    later = [e for e in sorted(train) if e >= 1]
    if not later:
        return None
    steps = [t for e in later for t in train[e]]
    settled = statistics.median(t for e in later for t in train[e][START_STEPS:])
    starts = [sum(train[e][:START_STEPS]) - START_STEPS * settled for e in later]
    return {"epochs": len(later), "steps": len(steps),
            "run_ms": (sum(steps) + sum(test.get(e, 0.0) for e in later)) / len(steps),
            "settled_ms": settled, "epoch_start_ms": statistics.fmean(starts),
            "eval_ms": statistics.fmean(test.get(e, 0.0) for e in later)}


def _logs(d: Path) -> dict[int, dict[str, float]]:
    out = {}
    for p in sorted((d / "logs").glob("j*.log")):
        if not re.fullmatch(r"j\d+", p.stem):
            continue
        got = run_times(p.read_text(errors="replace"))
        if got is not None:
            wall = p.with_suffix(".wall_ms")
            got["wall_s"] = float(wall.read_text()) / 1e3 if wall.exists() else float("nan")
            out[int(p.stem[1:])] = got
    return out


def _state(d: Path) -> dict | None:
    for p in (d / "rep" / "steps_rank0.json", d / "rep" / "try" / "steps_rank0.json"):
        if p.exists():
            return json.loads(p.read_text())["state"]
    return None


def _tried(d: Path) -> list[dict]:
    p = d / "rep" / "try.json"
    if not p.exists():
        return []
    tried = json.loads(p.read_text()).get("tried") or {}
    return [*(tried.get("fixes") or []), *([tried["combination"]] if tried.get("combination")
                                           else [])]


def table(d: Path) -> str:
    """The markdown table, then the persistent-workers row and the --try measurements."""
    logs, state = _logs(d), _state(d)
    run = observe(state) if state else None
    base = logs.get(4)
    out = ["| -j | run per step (ms) | settled step (ms) | epoch start (ms) | eval per epoch (ms) "
           "| wall (s) | measured vs -j 4 (run) | predicted from the -j 4 profile (low) |",
           "|---|---|---|---|---|---|---|---|"]
    for n, r in sorted(logs.items()):
        meas = f"{base['run_ms'] / r['run_ms']:.2f}x" if base else "-"
        pred = "-"
        if run is not None:  # and the low bound: half the free cores (hyperthread siblings)
            low = predict(run, n, free_cores=run.free_cores / 2).speedup_over(run)
            pred = f"{predict(run, n).speedup_over(run):.2f}x (low {low:.2f}x)"
        out.append(f"| {n} | {r['run_ms']:.1f} | {r['settled_ms']:.1f} | {r['epoch_start_ms']:.0f} "
                   f"| {r['eval_ms']:.0f} | {r['wall_s']:.1f} | {meas} | {pred} |")
    if run is not None:
        out.append("")
        out.append(f"-j 4 profile: {run.workers} workers on {run.cores} cores, supply "
                   f"{run.supply_ns / 1e6:.1f} ms per batch, the step's own {run.consume_ns / 1e6:.1f} ms, "
                   f"restarts {run.restart_ns / 1e6:.1f} ms per step, epoch every "
                   f"{run.epoch_steps} steps, waits: {run.waits}")
    if state is not None:
        r = epoch_restarts(StepClock.from_state(state), run)
        out.append(f"persistent_workers (loader-restarts, run-relative): {r.restarts} restart(s), "
                   f"{r.total_ns / 1e6:.0f} ms measured (forks {r.fork_ns / 1e6:.0f} ms, warm first "
                   f"round {r.fill_ns / 1e6:.0f} ms stays), estimated {r.speedup():.2f}x "
                   f"({r.speedup(r.fork_ns):.2f}-{r.speedup(max(r.fork_ns, r.total_ns)):.2f}) on "
                   f"{r.loop_step_ns / 1e6:.1f} ms per step")
    tried = _tried(d)
    if tried:
        out += ["", "| --try | relative to | estimated | measured | step (ms) | status |",
                "|---|---|---|---|---|---|"]
        for t in tried:
            est = t.get("estimated_speedup")
            mea = t.get("measured_speedup")
            out.append(f"| {t['label']} ({', '.join(t.get('knobs', []))}) | {t.get('relative_to')} "
                       f"| {f'{est:.2f}x' if est else '-'} | {f'{mea:.2f}x' if mea else '-'} "
                       f"| {t.get('step_ms') or '-'} | {t.get('status')} {t.get('reason') or ''} |")
    return "\n".join(out)
