"""Fixes tried on the user's own job (`advisor profile --try`): estimate beside measurement.

The data are built by `advisor.capture.trial` (which runs the trials) and carried by the report
(`Report.tried`); this module holds them and their JSON and console views, so the report layer
does not depend on the capture that produced them.

Why both numbers side by side: the estimate is a model (a replay of the profiled steps), the
measurement is the job itself with the knob turned, timed like the baseline. Where they differ
by more than `MODEL_MISS` the report says so with both numbers, so a model that does not fit
this job is visible instead of trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODEL_MISS = 1.35
"""A measured speedup off the estimate by more than this factor (either way) is a model miss:
the same factor the README holds the public-script estimates to."""


@dataclass(frozen=True)
class TriedFix:
    """One fix tried: its knobs, the estimate it came with, and what the runs measured."""

    label: str  # the rule(s) it fixes, or the knob named with --try
    knobs: tuple[str, ...]
    rules: tuple[str, ...] = ()  # the findings this knob is the fix of
    codes: tuple[str, ...] = ()
    numerics: tuple[str, ...] = ()  # how the knobs change the numbers computed ("" none)
    estimated: float | None = None  # the finding's estimated speedup
    estimated_low: float | None = None
    estimated_high: float | None = None
    relative_to: str = "step"  # "step": settled steps; "run": wall time per step, slow ones in
    status: str = "measured"  # "measured" or "failed"
    reason: str | None = None  # why it failed
    measured: float | None = None  # plain step / fixed step, over the paired runs
    measured_low: float | None = None  # the runs' spread (per-run ratios)
    measured_high: float | None = None
    runs: int = 0  # paired runs measured
    step_ms: float | None = None  # the fixed step (mean over its runs)
    applied: tuple[str, ...] = ()  # what the knobs reached in the script, in words

    @property
    def model_miss(self) -> bool:
        """The measurement is off the estimate by more than `MODEL_MISS`."""
        if not self.estimated or not self.measured:
            return False
        r = self.measured / self.estimated
        return r > MODEL_MISS or r < 1 / MODEL_MISS


@dataclass(frozen=True)
class NotTried:
    """A finding whose fix was not tried, and why (it needs a code change, most often)."""

    rule: str
    code: str
    reason: str


@dataclass(frozen=True)
class Tried:
    """Every trial of one `advisor profile --try`."""

    runs: int  # rounds asked for (each: plain, then every fix)
    steps: int  # settled steps timed per trial (--try-steps)
    seconds: float  # or this long (--try-time)
    statistic: str  # which step statistic a trial's step is
    plain_ms: tuple[float, ...]  # the plain runs' steps, in order (failed runs left out)
    fixes: tuple[TriedFix, ...]
    not_tried: tuple[NotTried, ...] = ()
    combination: TriedFix | None = None  # the best-measured fixes together, once
    order: tuple[str, ...] = ()  # the runs as they ran: "plain", labels
    scratch: str = ""  # where the trials' saves went
    notes: tuple[str, ...] = field(default_factory=tuple)
    # each plain run's settled steps (unprofiled, in order): `advisor gate`'s step-time sample
    plain_steps_ms: tuple[tuple[float, ...], ...] = ()


def _r(x: float | None, n: int = 4) -> float | None:
    return None if x is None else round(x, n)


def _fix_json(t: TriedFix) -> dict[str, Any]:
    return {
        "label": t.label, "knobs": list(t.knobs), "rules": list(t.rules), "codes": list(t.codes),
        "numerics": [n for n in t.numerics if n], "status": t.status, "reason": t.reason,
        "estimated_speedup": _r(t.estimated), "estimated_low": _r(t.estimated_low),
        "estimated_high": _r(t.estimated_high), "relative_to": t.relative_to,
        "measured_speedup": _r(t.measured), "measured_low": _r(t.measured_low),
        "measured_high": _r(t.measured_high), "runs": t.runs, "step_ms": _r(t.step_ms),
        "model_miss": t.model_miss, "applied": list(t.applied),
    }


def to_json(t: Tried) -> dict[str, Any]:
    """The ``tried`` section of the JSON result (schema: advisor/report/schema.json)."""
    return {
        "runs": t.runs, "steps": t.steps, "seconds": t.seconds, "statistic": t.statistic,
        "plain_step_ms": [round(x, 4) for x in t.plain_ms],
        "plain_steps_ms": [[round(x, 4) for x in run] for run in t.plain_steps_ms],
        "fixes": [_fix_json(f) for f in t.fixes],
        "combination": _fix_json(t.combination) if t.combination is not None else None,
        "not_tried": [{"rule": n.rule, "code": n.code, "reason": n.reason} for n in t.not_tried],
        "order": list(t.order), "scratch": t.scratch, "notes": list(t.notes),
        "model_miss_factor": MODEL_MISS,
    }


def side_by_side(t: TriedFix) -> str:
    """``estimated 1.04x, measured 1.31x (1.28-1.33, 2 runs)``, or why there is no number."""
    est = f"estimated {t.estimated:.2f}x" if t.estimated else "no estimate"
    if t.status != "measured" or t.measured is None:
        return f"{est}, failed: {t.reason}"
    runs = f"{t.runs} run{'s' if t.runs != 1 else ''}"
    spread = (f"{t.measured_low:.2f}-{t.measured_high:.2f}, " if t.runs > 1 and
              t.measured_low is not None and t.measured_high is not None else "")
    line = f"{est}, measured {t.measured:.2f}x ({spread}{runs})"
    if t.model_miss:
        line += (f"; model miss: measured {t.measured:.2f}x against {t.estimated:.2f}x "
                 f"estimated (off by more than {MODEL_MISS:g}x)")
    return line


def _readable(spec: str) -> str:
    """``loader:num_workers=1:pin_memory=true`` as ``loader (num_workers=1, pin_memory=true)``:
    the console wraps it between settings."""
    kind, *settings = spec.split(":")
    return f"{kind} ({', '.join(settings)})" if settings else kind


def console_lines(t: Tried) -> list[str]:
    """The console's "Tried on your job" section, plain text lines (the console wraps them)."""
    plain = (f"plain step {sum(t.plain_ms) / len(t.plain_ms):.3f} ms" if t.plain_ms
             else "no plain run measured")
    rounds = f"{t.runs} round{'s' if t.runs != 1 else ''}"
    out = [f"Tried on your job: {rounds}, {t.steps} settled steps or {t.seconds:g} s a run; "
           f"{plain} ({t.statistic})"]
    for i, f in enumerate((*t.fixes, *((t.combination,) if t.combination else ())), 1):
        tag = " [changes numerics]" if any(f.numerics) else ""
        knobs = ", ".join(f.knobs)
        out.append(f"{i}. {f.label}{tag}")
        if knobs != f.label:
            out.append("   knob: " + "; ".join(_readable(k) for k in f.knobs))
        out.append(f"   {side_by_side(f)}")
    for n in t.not_tried:
        out.append(f"- {n.rule}: not tried ({n.reason})")
    for note in t.notes:
        out.append(f"note: {note}")
    return out
