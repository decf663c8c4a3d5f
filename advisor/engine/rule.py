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

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

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


@dataclass(frozen=True)
class Option:
    default: float | int | str | bool
    doc: str


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
class Fix:
    title: str  # imperative: "Pin the host buffer and copy with non_blocking=True"
    snippet: str  # code the user can paste
    kind: str = "code"  # "code" or "config"
    requires: tuple[str, ...] = ()  # rule names whose fix must land first


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

    @property
    def saved_ns_per_step(self) -> float:
        return self.step_ns - self.predicted_step_ns


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


@dataclass(frozen=True)
class Skipped:
    rule: str
    reason: str


class Rule(ABC):
    """Base class of every rule. Subclasses set the class attributes and implement `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    category: ClassVar[Category]
    requires: ClassVar[tuple[Requirement, ...]] = (Requirement.STEPS, Requirement.GPU_WORK)
    options: ClassVar[Mapping[str, Option]] = {}
    status: ClassVar[Status] = Status.PREVIEW
    since: ClassVar[str] = "0.1.0"
    aliases: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "__abstractmethods__", None):
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
        for key, opt in cls.options.items():
            if not NAME_RE.match(key) or not isinstance(opt, Option):
                raise TypeError(f"rule {cls.__qualname__}: option {key!r} must be a kebab-case "
                                "name mapped to an Option")

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

    def option(self, ctx: RuleContext, key: str) -> float | int | str | bool:
        return ctx.option(self.name, key, self.options[key].default)

    @abstractmethod
    def check(self, graph: OpGraph, ctx: RuleContext) -> Iterable[Finding]:
        """Yield findings; never print, plot or read files."""
