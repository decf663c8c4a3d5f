"""`advisor profile --try`: run the script again with each knob fix turned on, and time it.

After the analysis, every finding whose fix is a knob (`Fix.knobs`, declared by its rule:
`advisor.engine.knobs`) is a candidate, or only the ones ``--try FIX,...`` names (rule names or
codes, or knobs written out: ``tf32``, ``loader:num_workers=8``). Each trial is a fresh process
(`advisor.capture.trial_child`) running the unmodified script with the knob applied from
advisor's hooks, timed on the settled steps as `advisor profile`'s baseline is timed. Runs are
interleaved, ``plain, A, B, plain, A, B, ...`` for ``--try-runs`` rounds, so slow drift of the
machine (clocks, thermals, other jobs) falls on every variant alike; each fix's speedup is the
plain step over the fixed step over the rounds where both ran, and the rounds' own ratios are
its spread. Fixes that measured faster are then tried together once.

Why measure at all: estimates are a model; on a real job the model can miss (a loader fix the
host cannot feed, autocast on a host-bound step). The measured number, beside the estimate,
says which fixes are worth the code change, on this job and this machine.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.engine.knobs import KnobError, is_knob, parse_knob
from advisor.engine.rule import Estimate, Finding
from advisor.errors import CaptureError
from advisor.report.tried import NotTried, Tried, TriedFix

DEFAULT_RUNS = 2
DEFAULT_STEPS = 50
DEFAULT_SECONDS = 60.0
STATISTIC = "mean of the settled steps, far outliers left out"
"""A trial's step: `advisor.capture.steptimes.measured_step`'s mean over the settled steps (the
steady throughput); a whole-run fix (``relative_to: run``) keeps the slow steps in instead."""

MULTI_RANK = (", per rank; the job's the slowest rank's; every rank stops after the same "
              "step index")
"""What a multi-process trial's step is (`job_result`, `advisor.capture.trial_child`)."""

RUN_CODES = {"loader-restarts": "RUN001", "blocking-checkpoints": "RUN002",
             "frequent-evaluation": "RUN003"}
"""Findings of the whole-run account (`advisor.capture.accounting`), named like rules."""


@dataclass(frozen=True)
class TrialOptions:
    """What ``--try``, ``--try-runs``, ``--try-steps`` and ``--try-time`` asked for."""

    names: tuple[str, ...] = ()  # empty: every finding whose fix is a knob
    runs: int = DEFAULT_RUNS
    steps: int = DEFAULT_STEPS
    seconds: float = DEFAULT_SECONDS


@dataclass
class Candidate:
    """One fix to try: its knobs and the findings (with their estimate) it is the fix of."""

    label: str
    knobs: tuple[str, ...]
    findings: list[Finding] = field(default_factory=list)
    primary: bool = True  # the fix as the finding states it (an alternative knob: False)

    @property
    def estimate(self) -> Estimate | None:
        # each trial applies one fix alone: a conditional finding's estimate alone is its peer
        f = self.findings[0] if self.findings and self.primary else None
        return None if f is None else (f.alone or f.estimate)

    @property
    def relative_to(self) -> str:
        return self.findings[0].estimate.relative_to if self.findings else "step"


def known_names() -> dict[str, str]:
    """Rule names and codes ``--try`` accepts -> the rule name."""
    from advisor.engine.registry import load_rules

    out: dict[str, str] = {}
    for r in load_rules():
        out[r.name] = out[r.code.lower()] = r.name
    for name, code in RUN_CODES.items():
        out[name] = out[code.lower()] = name
    return out


def parse_names(value: str) -> tuple[str, ...]:
    """``--try FIX,...`` checked before the script runs: one-line error for a wrong name."""
    known = known_names()
    out: list[str] = []
    for raw in value.split(","):
        name = raw.strip()
        if not name:
            continue
        if is_knob(name):
            try:
                parse_knob(name)
            except KnobError as e:
                raise CaptureError(f"--try: {e}") from None
        elif name.lower() not in known:
            raise CaptureError(f"--try: unknown fix {name!r}: give rule names or codes "
                               "(advisor rules) or knobs (bf16, tf32, compile, "
                               "compile:mode=reduce-overhead, loader:num_workers=N, ...)")
        else:
            name = known[name.lower()]
        out.append(name)
    return tuple(out)


def choose(findings: Sequence[Finding], names: Sequence[str]) -> tuple[list[Candidate], list[NotTried]]:
    """The fixes to try, one candidate per distinct knob set, and the findings not tried."""
    by_knobs: dict[tuple[str, ...], Candidate] = {}
    not_tried: list[NotTried] = []
    wanted_rules = {n for n in names if not is_knob(n)}

    def add(knobs: tuple[str, ...], f: Finding | None, primary: bool, label: str) -> None:
        c = by_knobs.get(knobs)
        if c is None:
            by_knobs[knobs] = Candidate(label, knobs, [f] if f is not None else [], primary)
        elif f is not None and f not in c.findings:
            c.findings.append(f)  # one trial for every finding this knob fixes
            if f.rule not in c.label.split(", "):
                c.label += ", " + f.rule

    for f in findings:
        if names and f.rule not in wanted_rules:
            continue
        if not f.fix.knobs:
            not_tried.append(NotTried(f.rule, f.code, "needs a code change: " + f.fix.title))
            continue
        first, *others = f.fix.knobs
        add((first,), f, True, f.rule)
        for k in others:
            add((k,), f, False, f"{f.rule} (alternative: {k.split(':')[0]})")
    for name in names:
        if is_knob(name):
            spec = parse_knob(name).spec
            match = next((f for f in findings if spec in (parse_knob(k).spec for k in f.fix.knobs)),
                         None)
            add((name,), match, match is not None and match.fix.knobs[0] == name, name)
        elif not any(f.rule == name for f in findings):
            not_tried.append(NotTried(name, RUN_CODES.get(name, ""),
                                      "the analysis has no finding of this rule"))
    return list(by_knobs.values()), not_tried


class Runner:
    """Starts trial processes and reads their results. With a ``launcher`` (torchrun and its
    options, `advisor.capture.launch.Launch.launcher`), a trial is the job's launcher line with
    ``--module advisor.capture.trial_child SPEC`` in place of the script: every rank runs the
    trial with the same spec and writes its own result, and `job_result` makes one of them."""

    def __init__(self, script: str, module: bool, args: Sequence[str], out: Path, steps: int,
                 seconds: float, say: Callable[[str], None], cwd: str | None = None,
                 launcher: Sequence[str] | None = None) -> None:
        self.script, self.module, self.args = script, module, list(args)
        self.cwd = cwd  # the profiled run's starting directory (None: this process's)
        self.dir = out / "try"
        self.steps, self.seconds, self.say = steps, seconds, say
        self.launcher = list(launcher) if launcher else None
        self.count = 0

    def run(self, label: str, knobs: Sequence[str], epochs: int = 0) -> dict[str, Any]:
        """One trial; its result (``status`` "failed" with a ``reason`` when it failed)."""
        self.count += 1
        tag = f"{self.count:02d}-" + "".join(c if c.isalnum() else "-" for c in label)[:40]
        self.dir.mkdir(parents=True, exist_ok=True)
        spec_path, result = self.dir / f"{tag}.spec.json", self.dir / f"{tag}.result.json"
        spec = {"script": self.script, "module": self.module, "args": self.args,
                "knobs": list(knobs), "steps": self.steps, "seconds": self.seconds,
                "epochs": epochs, "scratch": str((self.dir / "scratch" / tag).resolve()),
                "result": str(result.resolve()), "per_rank": self.launcher is not None}
        spec_path.write_text(json.dumps(spec, indent=1))
        env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
        child = ["advisor.capture.trial_child", str(spec_path.resolve())]
        cmd = ([*self.launcher, "--module", *child] if self.launcher
               else [sys.executable, "-m", *child])
        log = self.dir / f"{tag}.log"
        limit = 4 * self.seconds + 600
        with open(log, "wb") as fh:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, env=env, cwd=self.cwd)
            try:
                code = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                _end(proc)
                return {"status": "failed", "reason": f"the trial ran longer than {limit:g} s "
                        f"and was ended (log: {log})"}
            except KeyboardInterrupt:
                _end(proc)  # torchrun ends its workers on SIGTERM
                raise
        if self.launcher:
            out = job_result(rank_results(result), code, log)
        else:
            try:
                out = json.loads(result.read_text())
            except (OSError, ValueError):
                out = {"status": "failed", "reason": f"the trial process ended with {code} "
                       f"without a result (log: {log})"}
        out["log"] = str(log)
        return out


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM first (torchrun then ends its workers; a lone script exits), SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def rank_path(result: Path, rank: int) -> Path:
    """Where rank ``rank`` of a multi-process trial writes its result: ``<tag>.result.rank<R>.json``."""
    return result.with_name(result.name.removesuffix(".json") + f".rank{rank}.json")


def rank_results(result: Path) -> dict[int, dict[str, Any]]:
    """The per-rank results of one multi-process trial that were written, by rank."""
    out: dict[int, dict[str, Any]] = {}
    for p in result.parent.glob(result.name.removesuffix(".json") + ".rank*.json"):
        try:
            res = json.loads(p.read_text())
            out[int(res["rank"])] = res
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def job_result(ranks: dict[int, dict[str, Any]], code: int, log: Path) -> dict[str, Any]:
    """One multi-process trial's result from its ranks'. A rank that failed fails the trial
    with its reason (of several, the one whose script ended first: the others failed after
    it, typically in a collective it had left); a rank without a result (ended by torchrun once
    another failed, or killed) fails it too. Otherwise the trial's step is the **slowest
    rank's** settled-step mean: in a data-parallel job every rank waits for the slowest at its
    collectives, so the job runs at that rank's pace."""
    if not ranks:
        return {"status": "failed", "reason": f"torchrun ended with {code} and no rank wrote a "
                f"result (log: {log})"}
    world = max(int(r.get("world") or 1) for r in ranks.values())
    failed = [r for r in sorted(ranks) if ranks[r].get("status") != "ok"]
    if failed:
        first = min(failed, key=lambda r: ranks[r].get("ended_unix") or float("inf"))
        out = dict(ranks[first])
        out["reason"] = f"rank {first}: {out.get('reason')}"
        out["ranks"] = _per_rank(ranks)
        return out
    missing = [r for r in range(world) if r not in ranks]
    if missing:
        return {"status": "failed", "reason": f"rank {', '.join(map(str, missing))} ended "
                f"without a result (torchrun ended with {code}; log: {log})",
                "ranks": _per_rank(ranks)}
    slowest = max(ranks, key=lambda r: ranks[r]["mean_ns"])
    out = dict(ranks[slowest])
    out["run_mean_ns"] = max(r["run_mean_ns"] or 0 for r in ranks.values()) or None
    out["applied"] = list(dict.fromkeys(a for r in sorted(ranks) for a in ranks[r]["applied"]))
    out["slowest_rank"], out["ranks"] = slowest, _per_rank(ranks)
    return out


def _per_rank(ranks: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = ("status", "mean_ns", "run_mean_ns", "steps_timed", "settled_at", "stopped_at")
    return {str(r): {k: ranks[r].get(k) for k in keys} for r in sorted(ranks)}


def _stat(result: dict[str, Any], relative_to: str) -> float | None:
    if result.get("status") != "ok":
        return None
    return result.get("run_mean_ns" if relative_to == "run" else "mean_ns")


def _measure(c_label: str, knobs: Sequence[str], results: list[dict[str, Any]],
             plains: list[dict[str, Any]], relative_to: str, numerics: tuple[str, ...],
             base: dict[str, Any]) -> TriedFix:
    """Pair each run with its round's plain run: speedup, spread, runs."""
    pairs = [(p, r) for p, r in zip(plains, results, strict=False)
             if _stat(p, relative_to) and _stat(r, relative_to)]
    applied = tuple(dict.fromkeys(a for r in results for a in r.get("applied", [])))
    failed = [r for r in results if r.get("status") != "ok"]
    if not pairs:
        reason = (failed[0].get("reason") if failed else None) or "no plain run to compare with"
        return TriedFix(c_label, tuple(knobs), status="failed", reason=reason,
                        numerics=numerics, applied=applied, relative_to=relative_to, **base)
    ratios = [_stat(p, relative_to) / _stat(r, relative_to) for p, r in pairs]
    plain_mean = statistics.fmean(_stat(p, relative_to) for p, _ in pairs)
    fixed_mean = statistics.fmean(_stat(r, relative_to) for _, r in pairs)
    return TriedFix(c_label, tuple(knobs), numerics=numerics, relative_to=relative_to,
                    measured=plain_mean / fixed_mean, measured_low=min(ratios),
                    measured_high=max(ratios), runs=len(pairs), step_ms=fixed_mean / 1e6,
                    applied=applied, **base)


def settled_steps_ms(result: dict[str, Any]) -> tuple[float, ...]:
    """A trial's settled steps in ms, in order, as its mean was taken over them (``settled_ms``).
    A trial result written before it (the archived H100 runs) has every step in ``steps_ms``
    with the index the steps settled at: its ``steps_timed`` steps from there."""
    if result.get("status") != "ok":
        return ()
    if "settled_ms" in result:
        return tuple(float(x) for x in result["settled_ms"])
    start, count = result.get("settled_at"), result.get("steps_timed") or 0
    if start is None:
        return ()
    return tuple(float(ms) for i, ms in result.get("steps_ms") or () if i >= start)[:count]


def _numerics(knobs: Iterable[str]) -> tuple[str, ...]:
    return tuple(parse_knob(k).numerics for k in knobs)


def _combine(fixes: Sequence[TriedFix]) -> tuple[str, ...] | None:
    """The knobs of the fixes that measured faster, one per kind (the best of each)."""
    best: dict[str, tuple[float, str]] = {}
    for f in fixes:
        if f.measured is None or f.measured <= 1.0:
            continue
        for k in f.knobs:
            kind = parse_knob(k).kind
            if kind not in best or f.measured > best[kind][0]:
                best[kind] = (f.measured, k)
    knobs = tuple(k for _, k in best.values())
    return knobs if len(knobs) >= 2 else None


def try_fixes(findings: Sequence[Finding], opts: TrialOptions, runner: Runner,
              per_run_s: float | None = None) -> Tried:
    """Run every trial (interleaved rounds, then the combination) and put the numbers together;
    ``per_run_s``: what one run should take, from the profiled run (said before they start)."""
    cands, not_tried = choose(findings, opts.names)
    order: list[str] = []
    plains: list[dict[str, Any]] = []
    results: dict[str, list[dict[str, Any]]] = {c.label: [] for c in cands}
    notes: list[str] = []
    epochs = 2 if any(c.relative_to == "run" for c in cands) else 0
    if not cands:
        notes.append("nothing to try: no finding here has a fix advisor can turn on from "
                     "outside the script" + (" (among those named)" if opts.names else ""))
    total = opts.runs * (1 + len(cands)) + 1  # the warm-up run first
    interrupted = False
    if cands:
        eta = (f", each about {per_run_s:.0f} s after Python's own start-up, as the profiled "
               "run went (compilation comes on top)" if per_run_s else "")
        runner.say(f"advisor: --try: {total} runs of the script, a warm-up, then {opts.runs} "
                   "round(s) of plain, "
                   + ", ".join(c.label for c in cands) + eta)
    try:
        if cands:
            # The first run after the profiled one measured a third slower than every later
            # plain run on the H100 (nanoGPT: 15.4 ms, then 10.5 ms; the fixes' runs alike), so
            # the first round's ratio carried it: interleaving cancels drift, not a first-run
            # effect. One plain run goes first and is not counted.
            runner.say(f"advisor: --try warm-up: plain, not counted (1/{total})")
            order.append("warm-up")
            runner.run("warm-up", (), epochs)
        for rnd in range(opts.runs if cands else 0):
            runner.say(f"advisor: --try round {rnd + 1}/{opts.runs}: plain "
                       f"({len(order) + 1}/{total})")
            order.append("plain")
            plains.append(runner.run("plain", (), epochs))
            if plains[-1].get("status") != "ok":
                notes.append(f"plain run {rnd + 1} failed: {plains[-1].get('reason')}")
            for c in cands:
                prior = results[c.label]
                if prior and all(r.get("status") != "ok" for r in prior):
                    prior.append(prior[-1])  # failed before: not run again
                    continue
                runner.say(f"advisor: --try round {rnd + 1}/{opts.runs}: {c.label} "
                           f"({', '.join(c.knobs)}) ({len(order) + 1}/{total})")
                order.append(c.label)
                prior.append(runner.run(c.label, c.knobs, epochs))
    except KeyboardInterrupt:
        interrupted = True
        notes.append("interrupted (Ctrl-C): the runs completed before it are reported")
    fixes = []
    for c in cands:
        est = c.estimate
        base = {"rules": tuple(f.rule for f in c.findings), "codes": tuple(f.code for f in c.findings),
                "estimated": est.speedup if est and not est.withheld else None,
                "estimated_low": est.low if est and not est.withheld else None,
                "estimated_high": est.high if est and not est.withheld else None}
        fixes.append(_measure(c.label, c.knobs, results[c.label], plains, c.relative_to,
                              _numerics(c.knobs), base))
    combination = None
    knobs = None if interrupted else _combine(fixes)
    if knobs is not None:
        runner.say(f"advisor: --try: the faster fixes together ({', '.join(knobs)})")
        order.append("combination")
        try:
            res = runner.run("combination", knobs, epochs)
        except KeyboardInterrupt:
            res = {"status": "failed", "reason": "interrupted (Ctrl-C)"}
        paired = [p for p in plains if _stat(p, "step")]
        combination = _measure("together: " + ", ".join(knobs), knobs, [res] * len(paired),
                               paired, "step", _numerics(knobs), {})
        if combination.measured is not None:  # one run: its spread is the plain runs'
            combination = _one_run(combination)
    return Tried(runs=opts.runs, steps=opts.steps, seconds=opts.seconds, statistic=STATISTIC,
                 plain_ms=tuple(_stat(p, "step") / 1e6 for p in plains if _stat(p, "step")),
                 plain_steps_ms=tuple(steps for p in plains if (steps := settled_steps_ms(p))),
                 fixes=tuple(fixes), not_tried=tuple(not_tried), combination=combination,
                 order=tuple(order), scratch=str(runner.dir / "scratch"), notes=tuple(notes))


def _one_run(t: TriedFix) -> TriedFix:
    from dataclasses import replace

    return replace(t, runs=1)


HELD_WARN_BYTES = 2 * 2**30
"""GPU memory the profiled run still holds in advisor's process above which a warning says so."""


def release_gpu_memory() -> int:
    """Free what the profiled run left in this process before the trials start: the script ran
    here, and its model, optimizer state and the caching allocator's blocks would otherwise
    stay on the GPU beside every trial. Returns the bytes still allocated."""
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return 0
    torch.cuda.empty_cache()
    return int(torch.cuda.memory_allocated())


def _per_run_s(analysis: Any, opts: Any) -> float | None:
    """One trial's length as the profiled run predicts it: its start-up and warm-up, then the
    timed steps (or --try-time)."""
    acc, step = getattr(analysis, "run", None), analysis.results.baseline_step_ns
    if acc is None or not step:
        return None
    ramp = (acc.parts_ns.get("startup", 0) + acc.parts_ns.get("warmup", 0)) / 1e9
    return ramp + min(opts.trial.steps * step / 1e9, opts.trial.seconds)


def run_after_analysis(analysis: Any, opts: Any, talk: bool,
                       launcher: Sequence[str] | None = None) -> Tried:
    """`advisor.capture.reporting.report`'s hook: try the analysis's fixes on the script
    (``launcher``: under torchrun, as the job ran)."""
    target, args = opts.trial_target
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if talk else (lambda msg: None)
    held = release_gpu_memory()
    if held >= HELD_WARN_BYTES:
        say(f"advisor: --try: this process still holds {held / 2**30:.1f} GiB of GPU memory from "
            "the profiled run; a trial that needs all of the GPU may run out of memory")
    t0 = time.monotonic()
    runner = Runner(target.name, target.module, args, opts.out, opts.trial.steps,
                    opts.trial.seconds, say, cwd=getattr(opts, "trial_cwd", None),
                    launcher=launcher)
    tried = try_fixes(analysis.results.findings, opts.trial, runner,
                      None if launcher else _per_run_s(analysis, opts))
    if launcher:
        from dataclasses import replace

        tried = replace(tried, statistic=STATISTIC + MULTI_RANK)
    say(f"advisor: --try: {len(tried.order)} runs in {time.monotonic() - t0:.0f} s; logs, "
        f"results and the trials' saves in {runner.dir}")
    return tried
