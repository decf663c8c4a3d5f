"""What a `advisor profile --try` result's ``tried`` section gives the gate.

Two things, read like every other part of a saved result (checked at the input boundary, a bad
value is exit 2 naming the field, never a traceback):

* **Step-time evidence.** The plain reference runs of ``--try`` are the user's job run again
  without the profiler and timed on their settled steps (``plain_steps_ms``, one list per plain
  run). torch.profiler doubles a host-bound step (nanoGPT: 11.5 ms measured, 24.0 ms as traced)
  and `advisor profile` keeps about ten profiled steps; the plain runs give 30 to 100 steps of
  the real thing. When both sides carry them the step-time verdict is taken on them
  (`step_evidence`); one side's unprofiled steps against the other's profiled ones would
  compare two different clocks, so then both stay on their profiled steps, with a note.
* **Measured fixes.** Each fix was run on the job and timed against the plain runs of its
  rounds: its measured speedup, beside the verdict, says what the candidate could still gain
  (a fix that measured faster in every round is an available measured improvement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from advisor.errors import InputError, TraceFormatError

STEP_TIMES = ("auto", "profiled", "tried")
"""``--step-times``: ``auto`` takes the plain --try runs' steps when both sides carry them,
``profiled`` always the profiled steady steps (the gate before it read ``tried``), ``tried``
requires the plain runs' steps on both sides (exit 2 without)."""

TRIED_SOURCE = "unprofiled --try steps"
PROFILED_SOURCE = "steady steps"


@dataclass(frozen=True)
class MeasuredFix:
    """One fix as ``--try`` measured it on this run's job."""

    label: str
    knobs: tuple[str, ...]
    rules: tuple[str, ...]
    codes: tuple[str, ...]
    status: str  # "measured" or "failed"
    reason: str | None
    measured: float | None  # plain step / fixed step
    measured_low: float | None
    measured_high: float | None
    runs: int
    step_ms: float | None
    estimated: float | None
    numerics: bool  # the knobs change the numbers the model computes
    combination: bool = False  # the faster fixes tried together once

    @property
    def improvement(self) -> bool:
        """Faster in every round it ran: the lowest round's ratio is above 1."""
        low = self.measured_low if self.measured_low is not None else self.measured
        return (self.status == "measured" and self.measured is not None and self.measured > 1.0
                and low is not None and low > 1.0)

    def describe(self) -> str:
        """``compile (compiler-fusion KERN004): measured 1.21x (1.15-1.36, 2 runs), estimated
        1.13x; changes numerics``, or why there is no number."""
        named = self.label.split(", ")
        who = ", ".join((c if r in named else f"{r} {c}").strip()
                        for r, c in zip(self.rules, self.codes, strict=False))
        head = f"{self.label}" + (f" ({who})" if who else "")
        if self.status != "measured" or self.measured is None:
            return f"{head}: failed: {self.reason or 'no reason given'}"
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        spread = (f"{self.measured_low:.2f}-{self.measured_high:.2f}, "
                  if self.runs > 1 and self.measured_low is not None
                  and self.measured_high is not None else "")
        est = f", estimated {self.estimated:.2f}x" if self.estimated else ""
        step = f", {self.step_ms:.3f} ms a step" if self.step_ms else ""
        tags = [t for t, on in (("changes numerics", self.numerics),) if on]
        verdict = ("available measured improvement" if self.improvement else
                   "measured slower" if self.measured < 1.0 else "no clear gain")
        return (f"{head}: measured {self.measured:.2f}x ({spread}{runs}{step}){est}: {verdict}"
                + "".join(f"; {t}" for t in tags))


@dataclass(frozen=True)
class TriedRuns:
    """A run's ``tried`` section: its plain runs and its measured fixes."""

    rounds: int
    plain_ms: tuple[float, ...]  # each plain run's step (its settled steps' mean)
    plain_steps_ms: tuple[float, ...]  # every plain run's settled steps, pooled in order
    fixes: tuple[MeasuredFix, ...]

    @property
    def improvements(self) -> tuple[MeasuredFix, ...]:
        return tuple(f for f in self.fixes if f.improvement)


def _positive(v: Any, path: str, where: str, optional: bool = False) -> float | None:
    """A positive finite number (or null where ``optional``): a zero, negative or infinite
    step or speedup would turn any comparison into nonsense, so it is refused naming the field."""
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise TraceFormatError(f"{path}: tried.{where} holds {v!r}: a positive finite number "
                               "is expected")
    return float(v)


def _fix(f: dict[str, Any], path: str, where: str, combination: bool = False) -> MeasuredFix:
    num = {k: _positive(f.get(k), path, f"{where}.{k}", optional=True)
           for k in ("measured_speedup", "measured_low", "measured_high", "step_ms",
                     "estimated_speedup")}
    status = str(f["status"])
    if status == "measured" and num["measured_speedup"] is None:
        raise TraceFormatError(f"{path}: tried.{where} is 'measured' without a "
                               "measured_speedup")
    low, high = num["measured_low"], num["measured_high"]
    if low is not None and high is not None and low > high:
        raise TraceFormatError(f"{path}: tried.{where}: measured_low {low!r} is above "
                               f"measured_high {high!r}")
    return MeasuredFix(
        label=str(f["label"]), knobs=tuple(str(k) for k in f["knobs"]),
        rules=tuple(str(r) for r in f.get("rules") or ()),
        codes=tuple(str(c) for c in f.get("codes") or ()), status=status,
        reason=None if f.get("reason") is None else str(f["reason"]),
        measured=num["measured_speedup"], measured_low=low, measured_high=high,
        runs=int(f["runs"]), step_ms=num["step_ms"], estimated=num["estimated_speedup"],
        numerics=any(f.get("numerics") or ()), combination=combination)


def read_tried(data: dict[str, Any], path: str) -> TriedRuns | None:
    """The result's ``tried`` section, checked; None when the result has none (no ``--try``).
    The schema has already checked the types (`advisor.gate.inputs.validate_result`)."""
    t = data.get("tried")
    if t is None:
        return None
    if not isinstance(t, dict):  # a result read without the schema (a library caller)
        raise TraceFormatError(f"{path}: tried holds {type(t).__name__}: an object is expected")
    try:
        plain = tuple(_positive(v, path, f"plain_step_ms[{i}]")
                      for i, v in enumerate(t["plain_step_ms"]))
        steps = tuple(_positive(v, path, f"plain_steps_ms[{r}][{i}]")
                      for r, run in enumerate(t.get("plain_steps_ms") or ())
                      for i, v in enumerate(run))
        fixes = [_fix(f, path, f"fixes[{i}]") for i, f in enumerate(t["fixes"])]
        if t.get("combination") is not None:
            fixes.append(_fix(t["combination"], path, "combination", combination=True))
        rounds = int(t["runs"])
    except (KeyError, TypeError, ValueError) as e:
        raise TraceFormatError(f"{path}: tried is not a complete --try section "
                               f"({type(e).__name__}: {str(e)[:120]})") from None
    return TriedRuns(rounds, plain, steps, tuple(fixes))  # type: ignore[arg-type]


def check_step_times(value: str) -> None:
    if value not in STEP_TIMES:
        raise InputError(f"gate step_times must be one of {', '.join(STEP_TIMES)}, not {value!r}")


def step_evidence(base: TriedRuns | None, cand: TriedRuns | None, mode: str,
                  ) -> tuple[bool, list[str]]:
    """Whether the step-time verdict takes the plain --try runs' steps, and the notes that say
    why (or why not). ``mode`` ``tried`` without them on both sides is `InputError` (exit 2)."""
    check_step_times(mode)
    sides = (("baseline", base), ("candidate", cand))
    have = [role for role, t in sides if t is not None and t.plain_steps_ms]
    if mode == "profiled":
        return False, (["step time from the profiled steady steps (--step-times profiled); "
                        "the plain --try runs' steps were not used"] if have else [])
    if len(have) == 2:
        return True, [f"step time from the unprofiled steps of the plain --try runs "
                      f"({len(base.plain_steps_ms)} and {len(cand.plain_steps_ms)} steps; "  # type: ignore[union-attr]
                      "the profiled steps are still the evidence for everything else)"]
    missing = []
    for role, t in sides:
        if t is None:
            missing.append(f"the {role} is not a --try result")
        elif not t.plain_steps_ms:
            missing.append(f"the {role}'s --try result has no plain_steps_ms (written before "
                           "advisor kept them; only the plain runs' means)")
    if mode == "tried":
        raise InputError("--step-times tried needs the plain --try runs' steps on both sides: "
                         + "; ".join(missing))
    if base is None and cand is None:
        return False, []
    return False, ["step time from the profiled steady steps on both sides: "
                   + "; ".join(missing)]
