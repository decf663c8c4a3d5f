"""What a rule gets besides the graph: the analysed steps, options, and the what-if model."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from string import Template

from advisor.engine.effects import Effect
from advisor.engine.estimates import EstimateAPI
from advisor.engine.fix_variants import unknown_framework_fix
from advisor.engine.floors import Floor, PerStep, StepFloors, measure
from advisor.engine.framework import NO_PYTORCH, UNKNOWN, FrameworkInfo, detect
from advisor.engine.host import HostFacts
from advisor.engine.profiler_cost import Calibration
from advisor.engine.rule import Estimate, Fix
from advisor.engine.step_basis import StepBasis, assess
from advisor.engine.whatif import Replay, Simulation
from advisor.graph.model import OpGraph, Step

OUTLIER_MADS = 4.0
"""A replayed step is a far outlier above the median plus this many median absolute deviations
(and `OUTLIER_MIN_SHARE` of the median): the steps a median ignores (loader-jitter's bar)."""
OUTLIER_MIN_SHARE = 0.10


def analysed_steps(graph: OpGraph, pid: int | None = None) -> list[Step]:
    """The longest run of consecutive steady-state steps of the busiest step thread.

    One process is analysed (rank 0's role in a multi-process trace is played by whichever
    process has the most steps, unless ``pid`` names one: the job view assesses each rank's
    process as `advisor analyze --pid` would); the replay needs consecutive steps.
    """
    steady = graph.steady_steps
    if not steady:
        return []
    per_thread: dict[tuple[int, int], list[Step]] = {}
    for s in graph.steps:
        if pid is None or s.pid == pid:
            per_thread.setdefault((s.pid, s.tid), []).append(s)
    if not per_thread:
        return []
    key = max(per_thread, key=lambda k: sum(1 for s in per_thread[k] if not s.warmup))
    best: list[Step] = []
    run: list[Step] = []
    for s in sorted(per_thread[key], key=lambda s: s.cpu_start_ns):
        if s.warmup:
            run = []
            continue
        run.append(s)
        if len(run) > len(best):
            best = list(run)
    if sum(s.time_ns for s in best) <= 0:
        # Steps that took no time (every GPU interval collapsed onto one instant: a kernel that
        # "ends" at int64's last nanosecond pushes each later op there) measure nothing, and
        # every share of the step would divide by zero: the trace is summarised whole instead.
        return []
    return best


@dataclass
class RuleContext(EstimateAPI):
    """What a rank rule's `check` gets besides the graph; its `finding` (the estimate API of
    `advisor.engine.estimates`) replays the analysed steps with the fix's effects."""

    graph: OpGraph
    steps: list[Step]
    options: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    facts: HostFacts = field(default_factory=HostFacts)  # recorded by `advisor profile`
    # The profiler-overhead costs to take out of the replays; None: the ones calibrated for the
    # trace's profiler (`advisor.engine.profiler_cost.detect`).
    calibration: Calibration | None = None

    @cached_property
    def framework(self) -> FrameworkInfo:
        """Whose knobs the fixes use (`advisor.engine.framework`)."""
        return detect(self.graph, self.facts)

    def option(self, rule: str, key: str, default: object) -> object:
        return self.options.get(rule, {}).get(key, default)

    @cached_property
    def _recorded_and_template(self) -> tuple[Replay, Simulation]:
        """One simulation built for both: replayed as recorded, then made the template."""
        sim = Simulation(self.graph, self.steps)
        sim.seal()  # its columns built once: read by this replay, then edited into the template
        recorded = sim.run()
        sim.remove_profiler_overhead(self.calibration)
        return recorded, sim

    @cached_property
    def _template(self) -> Simulation | None:
        return self._recorded_and_template[1] if self.steps else None

    @property
    def simulation_template(self) -> Simulation | None:
        """The analysed steps with the profiler's overhead removed (None without steps)."""
        return self._template

    @cached_property
    def observed(self) -> Replay:
        """The replay of the trace as recorded, profiler overhead included."""
        return self._recorded_and_template[0]

    @cached_property
    def profiler_overhead_ns(self) -> float:
        """Estimated host time per step that the tracing profiler itself added (median)."""
        return max(0.0, self.observed.median_ns - self.baseline.median_ns)

    def simulation(self) -> Simulation:
        if self._template is None:
            raise ValueError("no steady-state steps to model")
        return self._template.fork()

    @cached_property
    def baseline(self) -> Replay:
        return self.simulation().run()

    @cached_property
    def basis(self) -> StepBasis:
        """Which steps, how found, and whether they can carry an estimate."""
        return assess(self.graph, self.steps)

    @cached_property
    def baseline_step_ns(self) -> float:
        """The report's one step time: the analysed steady steps' mean, replayed without the
        profiler's host overhead (every estimate's ``step_ns``).

        The mean, not the median: a job pays its total time over its steps, so the mean step is
        what a fix's saving is worth per step (issue 32: on a bursty loader, three quick steps
        and one slow one, the median described a step the user never pays). Outliers cannot
        move it much here: the analysed steps are the steady ones, warm-up excluded. Estimates
        keep their own basis for the saving (a ratio) and are applied to this step, as
        `advisor profile` applies them to its measured mean step."""
        if not self.steps:
            return 0.0
        if not self.graph.has_gpu_work:
            return self.step_ns
        return self.baseline.mean_ns

    def estimate(self, speedup: float, low: float, high: float, model: str,
                 assumptions: Sequence[str], basis: str, floor: Floor | None = None,
                 floor_binds: bool = False) -> Estimate:
        """An estimate on the report's baseline step, withheld where the steps cannot carry one;
        ``floor``: the floor that binds the step after the fix (`bound_by`)."""
        base = self.baseline_step_ns
        withheld = self.basis.withheld
        return Estimate(
            step_ns=base,
            predicted_step_ns=base / speedup if speedup > 0 else base,
            speedup=speedup,
            low=min(1.0, low) if withheld else low,  # withheld: widened down to no gain, labelled
            high=high,
            model=model,
            assumptions=tuple(assumptions),
            basis=basis,
            withheld=withheld,
            floor=floor,
            floor_binds=floor_binds,
        )

    @cached_property
    def step_ns(self) -> float:
        """The observed mean step time of the analysed steps."""
        return statistics.fmean(s.time_ns for s in self.steps) if self.steps else 0.0

    @cached_property
    def median_step_ns(self) -> float:
        return float(statistics.median(s.time_ns for s in self.steps)) if self.steps else 0.0

    def replay(self, effects: Sequence[Effect]) -> Replay:
        return self._what_if(effects)[0]

    def floors(self, effects: Sequence[Effect] = (), basis: str = "median") -> StepFloors:
        """The step's floors once ``effects`` are applied (`advisor.engine.floors`), as means
        over the steps ``basis`` rests on (`steps_for`)."""
        return self._what_if(effects)[1].over(self.steps_for(basis))

    @cached_property
    def _baseline_floors(self) -> PerStep:
        return measure(self._template) if self._template is not None else PerStep((), ())

    def _what_if(self, effects: Sequence[Effect]) -> tuple[Replay, PerStep]:
        """The replay of the steps with ``effects`` applied, and the floors they leave."""
        ordered = tuple(sorted(effects, key=lambda e: e.order))
        if not ordered:
            return self.baseline, self._baseline_floors  # the template as it is, replayed once
        cache = self.__dict__.setdefault("_replays", {})
        try:
            return cache[ordered]  # effects are values: the same fixes replay the same
        except KeyError:
            pass
        except TypeError:  # an effect holding something unhashable: replay it every time
            cache = {}
        sim = self.simulation()
        for e in ordered:
            e.apply(sim)
        # Effects that changed nothing (a fix with no calls or ops to act on in these steps)
        # leave the template as it was: its replay is the baseline's.
        found = (sim.run() if sim.changed() else self.baseline), measure(
            sim, ordered, self._baseline_floors)  # what the effects left alone: the template's
        cache[ordered] = found
        return found

    @cached_property
    def typical_steps(self) -> tuple[int, ...]:
        """The replayed steps a median-based estimate rests on: all but the baseline's far
        outliers (a profiler's buffer flush, a reallocation), which a median ignores too. Their
        mean, unlike their median, only shortens as work is taken away (issue #35)."""
        periods = self.baseline.periods
        if not periods:
            return ()
        med = statistics.median(periods)
        mad = statistics.median(abs(p - med) for p in periods)
        limit = med + max(OUTLIER_MADS * mad, OUTLIER_MIN_SHARE * med)
        return tuple(k for k, p in enumerate(periods) if p <= limit)

    def steps_for(self, basis: str) -> tuple[int, ...] | None:
        """Which replayed steps an estimate on ``basis`` averages: all of them for "mean"
        (jitter is the point), the typical ones for "median" (None: all)."""
        return None if basis == "mean" else self.typical_steps

    def _mean(self, replay: Replay, basis: str) -> float:
        steps = self.steps_for(basis)
        if steps is None:
            return replay.mean_ns
        return statistics.fmean(replay.periods[k] for k in steps) if steps else 0.0

    def before_after(self, effects: Sequence[Effect], basis: str = "median") -> tuple[float, float]:
        """The step before and after the effects, both replayed without the profiler's host
        overhead, so they describe the job as it runs unprofiled.

        The after step is the settled replay's mean step over the steps ``basis`` rests on
        (`steps_for`; a mean only shortens as work is taken away, where a median of replayed
        steps can lengthen when kernels get shorter, issue #35), held at or above the step's
        floors (`advisor.engine.floors`). ``basis`` "median" applies its saving to the median
        step, robust to the odd slow step a profiler causes; "mean" counts jitter, for fixes
        that remove it.
        """
        after, per_step = self._what_if(effects)
        base = self.baseline
        before = self._mean(base, basis)
        new = before
        if after is not base:
            new = self._mean(after, basis)
            if basis != "mean" and new > before and after.mean_ns <= base.mean_ns:
                # The fix spread the outlier steps' time over every step (the GPU's queue
                # evens them out): the typical steps are no longer those of the baseline, and
                # the medians compare like with like, neither slower than before.
                new = before * min(1.0, after.median_ns / base.median_ns)
            new = max(new, per_step.over(self.steps_for(basis)).ns)
        if basis == "mean":
            return before, new
        if not before:
            return base.median_ns, base.median_ns
        return base.median_ns, base.median_ns * new / before

    def floor_step_ns(self, floor: Floor | None, basis: str = "median") -> float:
        """``floor`` (a mean over the steps ``basis`` rests on, `floors`) on the report's step:
        every estimate's step is the report's one (`baseline_step_ns`), and a fix's saving is
        applied to it as the change of those steps' mean (`before_after`); 0 without a floor."""
        before = self._mean(self.baseline, basis)
        if floor is None or not before:
            return 0.0
        return self.baseline_step_ns * floor.ns / before

    def bound_by(self, effects: Sequence[Effect], basis: str = "median") -> tuple[Floor | None, bool]:
        """The floor that binds the step after ``effects`` (the highest over the steps
        ``basis`` rests on), on the report's step (`floor_step_ns`), and whether it holds the
        estimate up (the replay alone would have gone below it)."""
        after, per_step = self._what_if(effects)
        binding = per_step.over(self.steps_for(basis)).binding
        if binding is None:
            return None, False
        binds = after is not self.baseline and self._mean(after, basis) < binding.ns
        return replace(binding, ns=self.floor_step_ns(binding, basis)), binds

    def speedup(self, effects: Sequence[Effect], basis: str = "median") -> float:
        base, new = self.before_after(effects, basis)
        return base / new if new > 0 else 1.0

    def fix(self, rule: type, mechanism: str, params: Mapping[str, object] | None = None,
            requires: tuple[str, ...] = ()) -> Fix:
        """The rule's declared fix for ``mechanism`` in the detected framework (plain PyTorch
        where the rule declares none for it), its ``$names`` filled from ``params``."""
        values = {k: str(v) for k, v in (params or {}).items()}
        name = self.framework.name
        if name in (UNKNOWN, NO_PYTORCH):
            return unknown_framework_fix(rule, mechanism, values, requires, name)
        variant = rule.fix_for(mechanism, name)
        return Fix(title=Template(variant.title).substitute(values),
                   snippet=Template(variant.snippet).substitute(values),
                   kind=variant.kind, requires=requires, mechanism=mechanism,
                   framework=variant.framework,
                   knobs=tuple(Template(k).substitute(values)
                               for k in getattr(rule, "knobs", {}).get(mechanism, ())))

    def caveats(self, effects: Sequence[Effect]) -> tuple[str, ...]:
        """Said, never hidden (tests/engine/test_steady_replay.py): a replay still drifting."""
        replay = self.replay(effects)
        if replay.settled:
            return ()
        return (f"the replayed steps had not settled after {replay.passes} passes "
                "of the loop: the estimate is of a drifting replay",)

    def what_if(self, effects: Sequence[Effect], low_effects: Sequence[Effect] | None,
                high_effects: Sequence[Effect] | None, basis: str, model: str,
                assumptions: Sequence[str]) -> Estimate:
        """The replay of the steps with ``effects`` applied, on the report's baseline step: the
        rank scope's model behind `finding` (`advisor.engine.estimates.EstimateAPI`)."""
        base, after = self.before_after(effects, basis)
        speedup = base / after if after > 0 else 1.0
        low = self.speedup(low_effects, basis) if low_effects is not None else speedup
        high = self.speedup(high_effects, basis) if high_effects is not None else speedup
        low, high = min(low, speedup), max(high, speedup)
        floor, binds = self.bound_by(effects, basis)
        return self.estimate(speedup, low, high, model, assumptions, basis, floor, binds)
