"""The rule contract: what a rule declares, what it may return.

A rule is one class in one module of ``rules/``, named for the anti-pattern it detects (ruff's
convention). Its metadata lives on the class and is validated when the class is defined, so a
malformed plugin fails at import, not halfway through a report. Its docstring is its
documentation and follows a fixed section order (`DOC_SECTIONS`), which `advisor rules` prints and
a test enforces.

``check(graph, ctx)`` is pure: it reads the graph and yields `Finding`s through
``ctx.finding(...)``, which runs the what-if model (`advisor.engine.whatif`) on the effects the
rule says its fix has. Rules never compute speedups by hand, so every estimate comes from the same
model and all findings' fixes can be applied together.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from advisor.engine.floors import Floor
from advisor.engine.framework import FRAMEWORKS

if TYPE_CHECKING:
    from advisor.engine.context import RuleContext
    from advisor.graph.model import OpGraph

CODE_RE = re.compile(r"^[A-Z]{3,5}\d{3}$")
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
DOC_SECTIONS = (
    "What it detects",
    "Why it is slow",
    "Evidence",
    "Example",
    "Use instead",
    "Speedup model",
    "Known false positives",
    "References",
)


class Confidence(str, Enum):
    """How an estimate was reached. (``measured`` was dropped: no rule ever set it, since every
    estimate is the trace's replay; the JSON schema still accepts it in saved results.)"""

    MODELED = "modeled"  # derived from the trace's own timings with a physical model
    HEURISTIC = "heuristic"  # a rule of thumb; treat the number as a direction


class Category(str, Enum):
    HOST = "host"  # the CPU or its synchronizations hold the GPU back
    INPUT = "input"  # data loading and host-device copies
    KERNELS = "kernels"  # the GPU work itself could be cheaper
    PRECISION = "precision"  # number formats that leave tensor cores idle
    COMMUNICATION = "communication"  # collectives and the ranks' pace (job rules)


class Scope(str, Enum):
    """What a rule reads: one rank's op graph, or the whole job (all ranks' summaries aligned,
    `advisor.engine.job_model.Job`). Both declare the same metadata; only `check`'s input differs."""

    RANK = "rank"
    JOB = "job"


class Status(str, Enum):
    PREVIEW = "preview"
    STABLE = "stable"
    DEPRECATED = "deprecated"


class Requirement(str, Enum):
    """Facts about a trace a rule may need; unmet ones make the rule `Skipped`, not silent."""

    STEPS = "steps"  # at least one steady-state step
    GPU_WORK = "gpu_work"  # kernels or copies on a GPU
    LAUNCHES = "launches"  # host API calls correlated with the GPU work
    PHASES = "phases"  # named phases (data/forward/loss/backward/optimizer)
    COPIES = "copies"  # memcpy activity records
    KNOWN_GPU = "known_gpu"  # the GPU the trace names is one whose rates advisor knows
    SPREAD = "step_spread"  # `MIN_SPREAD_STEPS` steps: a spread between steps to judge


MIN_SPREAD_STEPS = 5
"""Steady-state steps a rule that judges the spread between steps (a slow step against the
median) needs: with fewer, one outlier is a fifth of the sample or more and no median stands
apart from it."""


class JobRequirement(str, Enum):
    """Facts about a job a job rule may need; unmet ones make it `Skipped`, as for a rank rule."""

    STEPS = "aligned_steps"  # steps aligned across the ranks
    COLLECTIVES = "collectives"  # communication kernels in the aligned steps
    THREE_RANKS = "three_ranks"  # three or more ranks (with two, one of them is the straggler)


GATE_SIGNALS = {
    "sync-calls": "explicit synchronizations",
    "pageable-copies": "copies from or to pageable host memory",
    "graph-replays": "CUDA graph replays",
    "standalone-gelu": "standalone GELU kernels",
    "fp32-gemms": "FP32 GEMM kernels",
    "fused-attention": "fused attention kernels",
}
"""Counts `advisor gate` reads off both runs, exact in any capture (`advisor.gate.signals`
counts them): a rule that declares one in ``gate_signals`` is judged by it, whether its
anti-pattern was introduced or was already there, instead of by timing-dependent estimates."""


@dataclass(frozen=True)
class Option:
    """A rule's setting (`[tool.advisor.options.RULE]`, ``--rule-option``). A numeric option is
    finite, and within ``minimum``/``maximum`` (inclusive) where the rule declares them: a NaN
    threshold compares false with everything and a negative one matches everything, so either
    would silently change what the rule reports."""

    default: float | int | str | bool
    doc: str
    minimum: float | None = None
    maximum: float | None = None

    def range_text(self) -> str:
        """The declared range as people write it ("0 to 1000", "at least 1"); "" if none."""
        if self.minimum is not None and self.maximum is not None:
            return f"{self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f"at least {self.minimum:g}"
        return f"at most {self.maximum:g}" if self.maximum is not None else ""

    def problem(self, value: float | int | str | bool) -> str | None:
        """Why ``value`` is not a valid setting of this numeric option (None: it is)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if not math.isfinite(value):
            return "must be a finite number"
        low = self.minimum if self.minimum is not None else -math.inf
        high = self.maximum if self.maximum is not None else math.inf
        if not low <= value <= high:
            return f"must be between {low:g} and {high:g}"
        return None


@dataclass(frozen=True)
class Validation:
    """A rule's out-of-sample check (issue 35): its scenario captured on an H100 at another shape
    than the captures its constants were fitted on (``fixtures/scenarios-check``), and the fix
    timed there without a profiler. Declared on the rule, so an installed advisor (which has no
    fixtures) can say which estimates were checked; `tests/test_validation_record.py` compares
    each record with the check set's captures (a record without a capture, or a capture without
    a record, fails), so it cannot drift from the data. A rule without one (``None``) is labelled
    unvalidated in its docs and findings: its estimate is the model's alone."""

    shape: Mapping[str, object]  # the check capture's scenario entries that differ from the fit one
    measured: float  # the fix's measured speedup at that shape: bad mean step / good mean step
    runs: int = 1  # separate process runs per variant behind ``measured`` (median over them)

    def text(self) -> str:
        """One line for docs and reports: where the estimate was checked and what the fix gave."""
        shape = ", ".join(f"{k} {v}" for k, v in self.shape.items())
        runs = f"{self.runs} process run{'s' if self.runs != 1 else ''} per variant"
        return (f"validated out of sample: the fix measured {self.measured:.2f}x on an H100 at "
                f"another shape than the model was fitted on ({shape}; {runs}); estimate against "
                "measurement in docs/validation.md")


UNVALIDATED = ("unvalidated: no out-of-sample check (no capture at another shape or model than "
               "the constants were fitted on, with the fix timed): the estimate is the model's alone")
"""The label of a finding or rule page whose rule declares no `Validation`."""


def validation_text(validation: Validation | None) -> str:
    """The label a rule's page and findings carry."""
    return validation.text() if validation is not None else UNVALIDATED


@dataclass(frozen=True)
class Evidence:
    """Where the problem is, in the trace's own terms.

    ``quantities`` are named with their unit as suffix (``gpu_idle_ns``, ``copy_bytes``,
    ``syncs_per_step``) so the report can format them without guessing.
    """

    steps: tuple[int, ...]
    kernels: tuple[str, ...] = ()
    ranges: tuple[str, ...] = ()
    api_calls: tuple[str, ...] = ()
    node_ids: tuple[str, ...] = ()
    quantities: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FixVariant:
    """One fix a rule declares: for the mechanism its evidence shows, in one framework's terms.

    ``title`` and ``snippet`` are `string.Template` text: ``$name`` is filled from the
    parameters the rule's `check` passes (``ctx.finding(..., params={"workers": 8})``); Python
    code rarely uses ``$``, so its braces stay as written."""

    mechanism: str  # the cause the evidence shows, kebab-case: "main-thread-loading"
    title: str  # imperative, names the mechanism: "Load batches in 8 DataLoader worker processes"
    snippet: str  # code the user can paste
    framework: str = "pytorch"
    kind: str = "code"  # "code" or "config"


@dataclass(frozen=True)
class Fix:
    title: str  # imperative: "Pin the host buffer and copy with non_blocking=True"
    snippet: str  # code the user can paste
    kind: str = "code"  # "code" or "config"
    requires: tuple[str, ...] = ()  # rule names whose fix must land first
    mechanism: str = ""  # which declared mechanism the evidence showed
    framework: str = "pytorch"  # whose knob the snippet uses
    # Knobs advisor can turn on to try this fix without editing the script (`advisor.engine.
    # knobs`, `advisor profile --try`), the first the fix itself; () when it needs a code change.
    knobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathStep:
    """One fix of a combination, applied after the ones before it: the step it leaves."""

    rule: str
    predicted_step_ns: float
    after: str | None = None  # the finding it depends on (conditional findings)
    floor: Floor | None = None


@dataclass(frozen=True)
class Estimate:
    """The step after the fix, from the what-if model.

    ``step_ns`` and ``predicted_step_ns`` are the analysed steady-state step (the median, or the
    mean where the finding is about jitter, see ``basis``) before and after the fix, both
    replayed without the tracing profiler's host overhead: the job as it runs unprofiled.
    ``speedup`` is their ratio; ``low``/``high`` bound it under the model's stated assumptions.
    Every estimate of one report has the same ``step_ns``, the report's baseline step (the
    unprofiled median); a ``basis`` "mean" speedup is applied to it, so no report shows two
    different step times for "the step".
    Under `advisor profile` the step before the fix is the measured unprofiled step and the
    replay's relative saving is applied to it (`advisor.capture.baseline`).
    """

    step_ns: float
    predicted_step_ns: float
    speedup: float
    low: float
    high: float
    model: str
    assumptions: tuple[str, ...]
    basis: str = "median"  # which step statistic: "median", or "mean" where jitter is the point
    # Why the steps cannot carry an estimate (too few, no warm-up, not a period of the loop):
    # the numbers above are then the model's, not to be shown as a prediction.
    withheld: str | None = None
    # "step": the steady step (the fix changes every step); "run": the whole run's wall time per
    # step (the fix removes time spent outside steady steps: worker restarts, checkpoints)
    relative_to: str = "step"
    # The highest of the step's floors after the fix (`advisor.engine.floors`), and whether it
    # holds the estimate up (the replay alone went below it).
    floor: Floor | None = None
    floor_binds: bool = False
    # The combined estimate only: the fixes in the order they combine, each with the step
    # after it and the ones before (`advisor.engine.combine`).
    path: tuple[PathStep, ...] = ()

    @property
    def saved_ns_per_step(self) -> float:
        return self.step_ns - self.predicted_step_ns

    def on_step(self, step_ns: float) -> Estimate:
        """The same estimate on another step (`advisor profile`'s measured one): the speedup
        kept, the predicted step, the floor and the path's steps scaled with it."""
        if self.step_ns <= 0:
            return self
        k = step_ns / self.step_ns
        floor = replace(self.floor, ns=self.floor.ns * k) if self.floor is not None else None
        path = tuple(replace(p, predicted_step_ns=p.predicted_step_ns * k,
                             floor=replace(p.floor, ns=p.floor.ns * k) if p.floor else None)
                     for p in self.path)
        return replace(self, step_ns=step_ns, predicted_step_ns=self.predicted_step_ns * k,
                       floor=floor, path=path)


@dataclass(frozen=True)
class Finding:
    rule: str
    code: str
    message: str
    evidence: Evidence
    fix: Fix
    estimate: Estimate
    confidence: Confidence
    effects: tuple = ()  # the what-if effects, kept so all fixes can be applied together
    low_effects: tuple = ()  # the pessimistic and optimistic variants, for the combined range
    high_effects: tuple = ()
    # Causal precedence (`advisor.engine.precedence`): set when another finding's cause explains
    # part of this one's time; the estimate is then this fix's gain once that one is fixed.
    conditional_on: str | None = None
    explained: str | None = None  # what the primary explains, in words
    # A conditional finding's estimate of its fix applied on its own (the primary not fixed):
    # what `advisor profile --try` measures (each fix alone), and what the findings are ranked
    # by. nanoGPT char (H200): CUDA graphs 2.01x once the loading was fixed, 2.30x measured
    # alone, listed after a 1.35x loader fix it beat (issue 33: the top fix is the best one).
    alone: Estimate | None = None
    # A job rule's finding (`Scope.JOB`): the ranks it concerns. () for a rank rule's finding,
    # which is about the one trace it read.
    ranks: tuple[int, ...] = ()
    # The rule's out-of-sample check (`Validation`); None: unvalidated, and labelled so in every
    # view (run findings, which no rule declares, are unvalidated too).
    validation: Validation | None = None

    @property
    def rank_speedup(self) -> float:
        """What the findings are ordered by: the fix's gain applied on its own."""
        return (self.alone or self.estimate).speedup


@dataclass(frozen=True)
class Skipped:
    rule: str
    reason: str


def skipped_by_reason(skipped: Iterable[Skipped]) -> list[tuple[str, list[str]]]:
    """Each reason once, with the rules it stopped (ten rules share "no steps")."""
    out: dict[str, list[str]] = {}
    for x in skipped:
        out.setdefault(x.reason, []).append(x.rule)
    return list(out.items())


def is_base(cls: type) -> bool:
    """A base class of rules (its `check` still abstract), not a rule: not validated. ABCMeta
    sets ``__abstractmethods__`` only after ``__init_subclass__`` runs, so it cannot tell."""
    return bool(getattr(getattr(cls, "check", None), "__isabstractmethod__", False))


class RuleSpec(ABC):
    """What every rule declares, whatever its scope: the class metadata, validated when the
    class is defined, and the docstring that documents it. `Rule` (one rank's graph) and
    `advisor.job.rule.JobRule` (the whole job) add only their `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    category: ClassVar[Category]
    scope: ClassVar[Scope] = Scope.RANK
    requires: ClassVar[tuple[Requirement | JobRequirement, ...]] = ()
    # The gate's exact counts this rule's anti-pattern moves (`GATE_SIGNALS`), and whether the
    # rule points at an upgrade, not a mistake (a change exposes it without introducing
    # anything: BF16 GEMMs are FP8 candidates, FP32 ones are not): `advisor gate` reads both.
    gate_signals: ClassVar[tuple[str, ...]] = ()
    opportunity: ClassVar[bool] = False
    options: ClassVar[Mapping[str, Option]] = {}
    # Declared data, written once (the engine assembles findings and docs from it): the fixes
    # per mechanism and framework, what each mechanism means, and the estimate's model text,
    # assumptions and confidence (`string.Template` text filled from `check`'s params).
    mechanisms: ClassVar[Mapping[str, str]] = {}
    # Rules whose cause, where also found, explains part of what this rule measures (with what,
    # in words): this rule's finding is then re-estimated for after that fix
    # (`advisor.engine.precedence`).
    explained_by: ClassVar[Mapping[str, str]] = {}
    fixes: ClassVar[tuple[FixVariant, ...]] = ()
    # Per mechanism, the knobs that apply its fix from outside the script (`advisor.engine.
    # knobs`, `string.Template` text like the fixes): what `advisor profile --try` runs. A
    # mechanism without one needs a code change and is not tried.
    knobs: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    model: ClassVar[str | Mapping[str, str]] = ""  # one text, or one per mechanism
    assumptions: ClassVar[tuple[str, ...]] = ()
    confidence: ClassVar[Confidence] = Confidence.MODELED
    status: ClassVar[Status] = Status.PREVIEW
    since: ClassVar[str] = "0.1.0"
    # The out-of-sample check behind the estimates (`Validation`); None: labelled unvalidated.
    validation: ClassVar[Validation | None] = None
    aliases: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if is_base(cls):
            return
        for attr in ("code", "name", "category"):
            if not hasattr(cls, attr):
                raise TypeError(f"rule {cls.__qualname__} lacks the class attribute {attr!r}")
        if not CODE_RE.match(cls.code):
            raise TypeError(f"rule {cls.__qualname__}: code {cls.code!r} is not like 'HOST001'")
        if not NAME_RE.match(cls.name):
            raise TypeError(f"rule {cls.__qualname__}: name {cls.name!r} is not kebab-case")
        if not cls.__doc__ or not cls.__doc__.strip():
            raise TypeError(f"rule {cls.__qualname__} has no docstring")
        wanted = Requirement if cls.scope is Scope.RANK else JobRequirement
        bad = [r for r in cls.requires if not isinstance(r, wanted)]
        if bad:
            raise TypeError(f"rule {cls.__qualname__}: requirements {bad} are not "
                            f"{wanted.__name__} values (a {cls.scope.value} rule)")
        unknown = [x for x in cls.gate_signals if x not in GATE_SIGNALS]
        if unknown:
            raise TypeError(f"rule {cls.__qualname__}: unknown gate signals {unknown} (one of "
                            f"{', '.join(GATE_SIGNALS)})")
        for key, opt in cls.options.items():
            if not NAME_RE.match(key) or not isinstance(opt, Option):
                raise TypeError(f"rule {cls.__qualname__}: option {key!r} must be a kebab-case "
                                "name mapped to an Option")
            if opt.problem(opt.default):
                raise TypeError(f"rule {cls.__qualname__}: option {key!r} default "
                                f"{opt.default!r} {opt.problem(opt.default)}")
        if cls.validation is not None and not (isinstance(cls.validation, Validation)
                                               and cls.validation.shape and cls.validation.runs >= 1
                                               and cls.validation.measured > 0):
            raise TypeError(f"rule {cls.__qualname__}: validation must be a Validation with a "
                            "shape, a measured speedup and at least one run (or None)")
        _check_fixes(cls)

    @classmethod
    def fix_for(cls, mechanism: str, framework: str) -> FixVariant:
        """The declared fix for this mechanism in this framework, else its plain-PyTorch one."""
        for wanted in (framework, "pytorch"):
            for v in cls.fixes:
                if v.mechanism == mechanism and v.framework == wanted:
                    return v
        raise KeyError(f"rule {cls.name} declares no fix for mechanism {mechanism!r}")

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0].strip()

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring's sections by title (``Title\\n-----`` headings)."""
        lines = (cls.__doc__ or "").expandtabs().splitlines()
        indent = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()), default=0)
        lines = [lines[0].strip()] + [x[indent:] for x in lines[1:]]
        sections: dict[str, list[str]] = {}
        current = None
        for i, line in enumerate(lines):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if line.strip() and set(nxt.strip()) == {"-"} and len(nxt.strip()) >= 3:
                current = line.strip()
                sections[current] = []
                continue
            if set(line.strip()) == {"-"} and current is not None and not sections[current]:
                continue
            if current is not None:
                sections[current].append(line)
        return {k: "\n".join(v).strip() for k, v in sections.items()}

    @classmethod
    def documented_sections(cls) -> dict[str, str]:
        """The docstring's sections with "Use instead" generated from the declared fixes."""
        from advisor.engine.fix_docs import use_instead

        out: dict[str, str] = {}
        for title, body in cls.doc_sections().items():
            out[title] = body
            if title == "Example" and cls.fixes:
                out["Use instead"] = use_instead(cls)
        return out



class Rule(RuleSpec):
    """Base class of every rank rule: it reads one rank's op graph. Subclasses set the class
    attributes and implement `check`."""

    requires: ClassVar[tuple[Requirement | JobRequirement, ...]] = (Requirement.STEPS,
                                                                    Requirement.GPU_WORK)

    def option(self, ctx: RuleContext, key: str) -> float | int | str | bool:
        return ctx.option(self.name, key, self.options[key].default)

    @abstractmethod
    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        """Yield findings; never print, plot or read files."""


def _check_fixes(cls: type[RuleSpec]) -> None:
    """Declared fixes are whole: known frameworks, described mechanisms, each with a
    plain-PyTorch variant, no two variants for the same (mechanism, framework)."""
    seen: set[tuple[str, str]] = set()
    for v in cls.fixes:
        if not isinstance(v, FixVariant):
            raise TypeError(f"rule {cls.__qualname__}: fixes must be FixVariant values")
        if v.framework not in FRAMEWORKS:
            raise TypeError(f"rule {cls.__qualname__}: unknown framework {v.framework!r} "
                            f"(one of {', '.join(FRAMEWORKS)})")
        if v.mechanism not in cls.mechanisms:
            raise TypeError(f"rule {cls.__qualname__}: fix mechanism {v.mechanism!r} is not "
                            "described in `mechanisms`")
        key = (v.mechanism, v.framework)
        if key in seen:
            raise TypeError(f"rule {cls.__qualname__}: two fixes for {key}")
        seen.add(key)
    for m in cls.mechanisms:
        if not NAME_RE.match(m):
            raise TypeError(f"rule {cls.__qualname__}: mechanism {m!r} is not kebab-case")
        if (m, "pytorch") not in seen:
            raise TypeError(f"rule {cls.__qualname__}: mechanism {m!r} has no plain-PyTorch fix")
    _check_knobs(cls)


def _check_knobs(cls: type[Rule]) -> None:
    """Declared knobs name described mechanisms and parse (``$params`` stand in for numbers)."""
    import re

    from advisor.engine.knobs import KnobError, parse_knob

    for m, specs in cls.knobs.items():
        if m not in cls.mechanisms:
            raise TypeError(f"rule {cls.__qualname__}: knob for undescribed mechanism {m!r}")
        for spec in specs:
            try:
                parse_knob(re.sub(r"\$\{?\w+\}?", "1", spec))
            except KnobError as e:
                raise TypeError(f"rule {cls.__qualname__}: {e}") from None
