"""The gate's decision: may the candidate replace the baseline?

Evidence, in order:

1. Comparable runs (`workload`), else exit 2.
2. Anti-patterns introduced: rule findings that are new or worse (`findings`; not those merely
   unmasked), and counts that show a rule's anti-pattern appearing, confirmed by the rule
   (`signals`). Each fails on its own, however small the step-time change, naming the rule,
   unless ``--allow``-ed.
3. The step time (`timing`): slower beyond the threshold and the runs' noise fails, unless the
   slowdown is host timing noise (`noise`; findings whose estimates moved with the host are then
   excused too). It names the rules implicated in it. An ``--allow``-ed rule accounts only for
   the part of the slowdown its own evidence explains (the growth of its cost per step); what
   is left still fails when it alone exceeds the threshold.
0. Before all: steps that cannot carry an estimate (too few, no warm-up, a window shorter than
   one period of the loop: `advisor.engine.step_basis`) cannot carry a verdict either: the
   result is inconclusive (exit 2) with the reason, whatever else was found.
4. Otherwise a step-time verdict that cannot be reached (too few steps, too noisy, a host-only
   slowdown under torch.profiler) is exit 2.

Which steps the step time is judged on: the profiled steady steps, or, when both runs are
`advisor profile --try` results carrying them, the plain --try runs' unprofiled steps
(`advisor.gate.tried.step_evidence`, ``Policy.step_times``). The profiler's host overhead is
then out of the comparison, so a host-only slowdown is no longer refused as the profiler's.

The exit code is `GateResult.exit_code`, the only place it is decided.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.errors import ExitCode, InputError
from advisor.gate.attribution import Attribution, attribute
from advisor.gate.findings import (
    FindingChange,
    compare_findings,
    mark_host_noise,
    mark_unmasked,
)
from advisor.gate.inputs import GateInput
from advisor.gate.noise import HostNoise, host_noise, profiler_host_only
from advisor.gate.signals import Signal, anti_pattern_signals, rule_roles
from advisor.gate.timing import ALPHA, MIN_STEPS, Timing, compare_timing
from advisor.gate.tried import PROFILED_SOURCE, TRIED_SOURCE, check_step_times, step_evidence
from advisor.gate.workload import check_comparable
from advisor.ingest.base import LoadOptions

if TYPE_CHECKING:
    from advisor.config import RuleSettings

DEFAULT_THRESHOLD = 0.05
MAX_THRESHOLD = 10.0
"""A tenfold slowdown (``--threshold 1000``): beyond it a threshold gates nothing."""


def check_fraction(name: str, value: object, upper: float) -> None:
    """A positive finite fraction no larger than ``upper``, or `InputError` (exit 2)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= upper:
        raise InputError(f"gate {name} must be a finite number above 0 and at most {upper:g}, "
                         f"not {value!r}")


@dataclass(frozen=True)
class Policy:
    threshold: float = DEFAULT_THRESHOLD  # a fraction: 0.05 is 5%
    allow: frozenset[str] = frozenset()  # rule names or codes whose regressions are accepted
    alpha: float = ALPHA
    min_steps: int = MIN_STEPS
    step_times: str = "auto"  # `advisor.gate.tried.STEP_TIMES`

    def __post_init__(self) -> None:
        # A NaN threshold fails every comparison (`x > nan` is False): the gate would pass
        # anything. Library callers get the same refusal as the command line.
        check_fraction("threshold", self.threshold, upper=MAX_THRESHOLD)
        check_fraction("alpha", self.alpha, upper=1.0)
        if isinstance(self.min_steps, bool) or not isinstance(self.min_steps, int) \
                or self.min_steps < 1:
            raise InputError(f"gate min_steps must be a whole number of at least 1, not "
                             f"{self.min_steps!r}")
        check_step_times(self.step_times)

    def allows(self, rule: str, code: str = "") -> bool:
        return rule in self.allow or (bool(code) and code in self.allow)


@dataclass(frozen=True)
class Regression:
    kind: str  # "step-time", "finding" or "anti-pattern"
    summary: str  # one line: what regressed and by how much
    rules: tuple[str, ...]  # the rules it names (may be empty for a step-time regression)
    codes: tuple[str, ...]
    allowed: bool


@dataclass(frozen=True)
class GateResult:
    baseline: GateInput
    candidate: GateInput
    policy: Policy
    timing: Timing
    host_noise: HostNoise | None
    findings: tuple[FindingChange, ...]
    signals: tuple[Signal, ...]
    attribution: Attribution
    regressions: tuple[Regression, ...]
    inconclusive: tuple[str, ...]  # why a verdict could not be reached
    notes: tuple[str, ...] = field(default=())
    refused: bool = False  # the steps cannot carry a verdict: inconclusive before all else

    @property
    def failures(self) -> tuple[Regression, ...]:
        return tuple(r for r in self.regressions if not r.allowed)

    @property
    def status(self) -> str:
        if self.refused:
            return "inconclusive"
        if self.failures:
            return "fail"
        if self.inconclusive:
            return "inconclusive"
        return "pass"

    @property
    def exit_code(self) -> ExitCode:
        return {"fail": ExitCode.GATE_FAILED, "inconclusive": ExitCode.BAD_INPUT,
                "pass": ExitCode.OK}[self.status]


def _rule_codes() -> dict[str, str]:
    from advisor.engine.registry import load_rules

    return {r.name: r.code for r in load_rules()}


def _finding_regressions(changes: Iterable[FindingChange], policy: Policy) -> list[Regression]:
    out = []
    for f in changes:
        if not f.regressed:
            continue
        cost = (f"costs {f.cand_saved_ms:.3f} ms/step" if f.status == "new" else
                f"costs {f.base_saved_ms:.3f} -> {f.cand_saved_ms:.3f} ms/step")
        speedup = f", est. {f.cand_speedup:.2f}x if fixed" if f.cand_speedup else ""
        out.append(Regression("finding", f"{f.rule} ({f.code}): {f.status} finding, {cost}"
                              f"{speedup}: {f.message}", (f.rule,), (f.code,),
                              policy.allows(f.rule, f.code)))
    return out


def _signal_regressions(signals: Iterable[Signal], codes: dict[str, str],
                        policy: Policy) -> list[Regression]:
    return [Regression("anti-pattern", f"{s.rule} ({codes.get(s.rule, '')}): {s.message}",
                       (s.rule,), (codes.get(s.rule, ""),),
                       policy.allows(s.rule, codes.get(s.rule, "")))
            for s in signals]


def _implicated(regs: Iterable[Regression]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    rules: dict[str, str] = {}
    for r in regs:
        for name, code in zip(r.rules, r.codes, strict=False):
            rules.setdefault(name, code)
    return tuple(rules), tuple(rules.values())


def explained_ms(base: GateInput, cand: GateInput, rules: Iterable[str]) -> float:
    """The slowdown per step that these rules' own evidence explains: how much their cost per
    step (the time their fix would save, matches under the reporting threshold included) grew
    from the baseline to the candidate."""
    def cost(x: GateInput, rule: str) -> float:
        return sum(f.saved_ms for f in x.findings if f.rule == rule)

    return sum(max(0.0, cost(cand, r) - cost(base, r)) for r in set(rules))


def _step_regression(timing: Timing, attribution: Attribution, named: list[Regression],
                     base: GateInput, cand: GateInput, policy: Policy) -> Regression:
    rules, codes = _implicated(named)
    where = [c for c in (attribution.gpu_busy_ms, attribution.gpu_idle_ms) if c and c.delta > 0]
    grew = [c for c in attribution.categories_ms if c.delta > 0][:2]
    top = [f"{c.name} {c.delta:+.3f} ms" for c in (*where, *grew)]
    because = f"; {', '.join(top)}" if top else ""
    by = f"; rules: {', '.join(f'{r} ({c})' for r, c in zip(rules, codes, strict=False))}" \
        if rules else ""
    pairs = list(zip(rules, codes, strict=False))
    allowed_rules = [r for r, c in pairs if policy.allows(r, c)]
    if not allowed_rules:
        return Regression("step-time", f"step time {timing.describe()}{because}{by}", rules,
                          codes, False)
    slowdown = timing.cand_median_ms - timing.base_median_ms
    explained = min(slowdown, explained_ms(base, cand, allowed_rules))
    rest = slowdown - explained
    limit = policy.threshold * timing.base_median_ms
    all_allowed = len(allowed_rules) == len(pairs)
    allowed = all_allowed and rest <= limit
    account = (f"; allowed {', '.join(allowed_rules)} explain{'s' if len(allowed_rules) == 1 else ''}"
               f" {explained:.3f} ms of the {slowdown:.3f} ms slowdown, "
               f"{rest:.3f} ms ({rest / timing.base_median_ms:+.1%}) "
               + ("is within the threshold" if rest <= limit else
                  f"is unexplained and above the {policy.threshold:.0%} threshold"))
    return Regression("step-time", f"step time {timing.describe()}{because}{by}{account}",
                      rules, codes, allowed)


def _judge_step(timing: Timing, noise: HostNoise | None, base: GateInput, cand: GateInput,
                attribution: Attribution, named: list[Regression], policy: Policy,
                ) -> tuple[Regression | None, list[str], list[str]]:
    """The step-time outcome: (regression, reasons it is inconclusive, notes)."""
    slower = timing.verdict in ("slower", "noisy")
    if noise is not None:
        return None, [], [f"host timing noise: step time {timing.describe()}, but "
                          + "; ".join(noise.reasons)]
    # unprofiled steps carry no profiler overhead: a host-only slowdown there is the job's own
    profiled = timing.source != TRIED_SOURCE
    profiler = (profiler_host_only(base, cand, policy.threshold)
                if slower and not named and profiled else None)
    if profiler:
        return None, [f"step time {timing.describe()}: {profiler}"], []
    if timing.verdict == "slower":
        return _step_regression(timing, attribution, named, base, cand, policy), [], []
    if timing.verdict == "noisy":
        return None, [f"step time {timing.describe()}: larger than the {policy.threshold:.0%} "
                      f"threshold but not significant at {policy.alpha:g}; capture more steady "
                      "steps or a quieter machine"], []
    if timing.verdict == "too few steps":
        return None, [f"too few {timing.source} to compare step times ({timing.n_base} and "
                      f"{timing.n_cand}; at least {policy.min_steps} each)"], []
    return None, [], []


def _context_notes(base: GateInput, cand: GateInput, signals: Iterable[Signal],
                   changes: Iterable[FindingChange]) -> list[str]:
    """What the reader should know but that decided nothing."""
    notes = [f"{s.rule}: {s.message}, but the rule found no added cost: not counted as a "
             "regression" for s in signals if not s.confirmed]
    notes += [f"{f.rule}: {f.status} finding ({f.base_saved_ms:.3f} -> {f.cand_saved_ms:.3f} "
              "ms/step): " + ("the pattern did not grow; other time moved"
                              if f.status == "unmasked" else "its estimate moved with the host")
              for f in changes if f.status in ("unmasked", "host-noise")]
    for x, other, role in ((base, cand, "baseline"), (cand, base, "candidate")):
        notes += [f"{role}: rule {r} did not run: {why}" for r, why in x.skipped.items()
                  if r not in other.skipped]
    return notes


def compare(base: GateInput, cand: GateInput, policy: Policy | None = None) -> GateResult:
    """Compare two runs; raises `AnalysisError` when they cannot be compared at all."""
    policy = policy or Policy()
    notes = check_comparable(base, cand)
    for x, role in ((base, "baseline"), (cand, "candidate")):
        notes.extend(f"{role}: {n}" for n in x.notes)
        if x.steps_held > len(x.step_times_ms):
            notes.append(f"{role}: judged on {x.steps_judged} it holds (a window of them was "
                         "analysed: --max-steps); steps outside it were not judged")
    codes = _rule_codes()
    unprofiled, evidence = step_evidence(base.tried, cand.tried, policy.step_times)
    notes.extend(evidence)
    if unprofiled:
        timing = compare_timing(base.tried.plain_steps_ms, cand.tried.plain_steps_ms,  # type: ignore[union-attr]
                                policy.threshold, policy.alpha, policy.min_steps, TRIED_SOURCE)
    else:
        timing = compare_timing(base.step_times_ms, cand.step_times_ms, policy.threshold,
                                policy.alpha, policy.min_steps, PROFILED_SOURCE)
    slower = timing.verdict in ("slower", "noisy")
    roles = rule_roles()
    signals = anti_pattern_signals(base, cand, roles)
    confirmed = [s for s in signals if s.confirmed]
    changes = mark_unmasked(compare_findings(base, cand), base, cand,
                            {s.rule for s in confirmed}, slower, roles)
    noise = host_noise(base, cand, timing.change, policy.threshold) if slower else None
    excused = noise if noise is not None and noise.is_noise and not confirmed else None
    if excused:
        changes = mark_host_noise(changes)
    named = [*_finding_regressions(changes, policy),
             *_signal_regressions(confirmed, codes, policy)]
    attribution = attribute(base, cand)
    step, inconclusive, step_notes = _judge_step(timing, excused, base, cand, attribution, named,
                                                 policy)
    regressions = ([step] if step else []) + named
    notes += step_notes + _context_notes(base, cand, signals, changes)
    refusals = [f"{role}: its steps cannot carry a verdict: {x.withheld}"
                for x, role in ((base, "baseline"), (cand, "candidate")) if x.withheld]
    return GateResult(base, cand, policy, timing, noise, tuple(changes), tuple(signals),
                      attribution, tuple(regressions), tuple(refusals + inconclusive),
                      tuple(notes), refused=bool(refusals))


def gate(baseline: str, candidate: str, policy: Policy | None = None,
         load_options: LoadOptions | None = None, settings: RuleSettings | None = None,
         ) -> GateResult:
    """Read both runs (traces or advisor JSON results) and compare them; ``settings``: the
    rules' configuration (the project's [tool.advisor] when None)."""
    from advisor.gate.inputs import load_input

    return compare(load_input(baseline, load_options, settings),
                   load_input(candidate, load_options, settings), policy)
