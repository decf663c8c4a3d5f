"""Whole-run accounting: the wall time users pay for, not only the steady step.

From the session's host clock at step boundaries and its timed host activities (`HOST_ACTIVITIES`
in `advisor.capture.capture_state`), the run's wall time splits into: start-up before the first step,
warm-up steps, the recorded window (advisor's own cost), steady steps, the excess of far-outlier
steps over the steady step (an epoch boundary where DataLoader workers restart, an evaluation, a
checkpoint inside one step), time between steps, and the end. The excess is explained by what the
host was timed doing in those steps; significant causes become findings whose estimates are
relative to the whole run's throughput (`Estimate.relative_to == "run"`), not to the step.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from advisor.capture.steptimes import StepClock, far_out_fence
from advisor.engine.loader_model import LoaderRun, RestartCost, restart_cost
from advisor.engine.measured import MeasuredStep, RunAccount, SlowStep
from advisor.engine.rule import Confidence, Estimate, Evidence, Finding, Fix

MIN_RUN_SAVING = 0.02
"""A whole-run fix that saves under 2% of the run is not reported (the same bar as step fixes)."""


def _explain(excess: int, act: dict[str, int], data_typical: float) -> dict[str, int]:
    """Split a step's excess over the steady step among what the host was timed doing."""
    left = excess
    out: dict[str, int] = {}
    wants = [("checkpoint", act.get("checkpoint", 0)), ("eval", act.get("eval", 0)),
             ("loader_start", act.get("loader_start", 0)),
             ("data", max(0, act.get("data", 0) - int(data_typical)))]
    for name, ns in wants:
        take = min(left, ns)
        if take > 0:
            out[name] = take
            left -= take
    if left > 0:
        out["other"] = left
    return out


def account(clock: StepClock, measured: MeasuredStep | None,
            loader: LoaderRun | None = None) -> RunAccount | None:
    """The run's wall time split into its parts (None without a step or an end time);
    ``loader``: the DataLoader as the loader model read it, for the cost of its restarts."""
    times = sorted(clock.times)
    if not times or clock.run_end_ns is None:
        return None
    w = clock.window
    near_window = (lambda i: w[0] - 1 <= i <= w[1] + 1) if w else (lambda i: False)
    warm = (lambda i: i <= clock.settled_at) if clock.settled_at is not None else (lambda i: False)
    rest = [(i, e - b) for i, b, e in times if not near_window(i) and not warm(i)]
    if measured is not None:
        typical = measured.median_ns
    elif rest:
        typical = float(statistics.median(ns for _, ns in rest))
    else:
        typical = float(statistics.median(e - b for _, b, e in times))
    fence = far_out_fence([ns for _, ns in rest]) if len(rest) >= 4 else float("inf")
    data = [clock.activity.get(i, {}).get("data", 0) for i, _ in rest]
    data_typical = float(statistics.median(data)) if data else 0.0
    parts = dict.fromkeys(("startup", "warmup", "profiled", "steady", "slow_steps",
                           "between_steps", "end"), 0)
    parts["startup"] = times[0][1]
    parts["end"] = max(0, clock.run_end_ns - times[-1][2])
    causes: dict[str, int] = {}
    slow: list[SlowStep] = []
    for k, (i, b, e) in enumerate(times):
        ns = e - b
        if near_window(i):
            parts["profiled"] += ns
        elif warm(i):
            parts["warmup"] += ns
        elif ns > fence:
            excess = int(ns - typical)
            parts["steady"] += ns - excess
            parts["slow_steps"] += excess
            why = _explain(excess, clock.activity.get(i, {}), data_typical)
            slow.append(SlowStep(i, ns, excess, why))
            for c, v in why.items():
                causes[c] = causes.get(c, 0) + v
        else:
            parts["steady"] += ns
        if k + 1 < len(times):
            gap = times[k + 1][1] - e
            if near_window(i) or near_window(times[k + 1][0]):
                parts["profiled"] += gap  # the window's own start and stop work
            else:
                parts["between_steps"] += gap
                if gap > 0:
                    causes["between steps"] = causes.get("between steps", 0) + gap
    restarts = epoch_restarts(clock, loader)
    checkpoints = sum(a.get("checkpoint_calls", 0) for a in clock.activity.values())
    return RunAccount(int(clock.run_end_ns), len(times), typical, parts, causes, slow,
                      restarts.restarts, int(restarts.total_ns), checkpoints)


def epoch_restarts(clock: StepClock, loader: LoaderRun | None = None) -> RestartCost:
    """What the workers' restarts at every epoch cost the run (`loader_model.restart_cost`):
    the settled steps outside the window are the loop's own time."""
    times = sorted(clock.times)
    w = clock.window
    settled = {i for i, _ in clock.steady_candidates()} if clock.settled_at is not None else {
        i for i, _, _ in times if not (w and w[0] - 1 <= i <= w[1] + 1)}
    data = [clock.activity.get(i, {}).get("data", 0) for i in settled]
    typical = float(statistics.median(data)) if data else 0.0
    return restart_cost([(i, e - b) for i, b, e in times], clock.activity, settled, typical,
                        loader)


def _estimate(acc: RunAccount, saved: float, low_saved: float, model: str,
              assumptions: Iterable[str]) -> Estimate:
    per = acc.run_ns / max(1, acc.steps)
    after = (acc.run_ns - saved) / max(1, acc.steps)
    low_after = (acc.run_ns - low_saved) / max(1, acc.steps)
    return Estimate(step_ns=per, predicted_step_ns=after, speedup=per / after,
                    low=per / low_after, high=per / after, model=model,
                    assumptions=tuple(assumptions), basis="mean", relative_to="run")


def _restart_finding(acc: RunAccount, r: RestartCost, steps: tuple[int, ...]) -> Finding | None:
    """Keep the workers alive between epochs: an epoch-level fix, estimated against the settled
    loop's time per step with the restarts at the run's own rate (`RestartCost`)."""
    per = r.loop_step_ns
    if per <= 0 or r.saved_ns / max(1, r.steps) < MIN_RUN_SAVING * per:
        return None
    after = per - r.saved_ns / max(1, r.steps)
    ms = lambda ns: f"{ns / 1e6:.0f} ms"  # noqa: E731
    each = r.total_ns / r.restarts
    return Finding(
        rule="loader-restarts", code="RUN001",
        message=(f"DataLoader workers were restarted {r.restarts} time(s) (a loader that had "
                 f"started before started its workers again), {ms(each)} each "
                 f"({ms(r.fork_ns / r.restarts)} forking them, the rest the "
                 "steps that waited while the fresh workers refilled the prefetch queue), "
                 f"{r.total_ns / 1e9:.2f} s in all: {r.total_ns / r.steps / per:.0%} of the "
                 "loop's time per step; persistent workers keep the forks and the start-up"),
        evidence=Evidence(steps=steps, quantities={
            "loader_restarts": r.restarts, "loader_restart_ns": r.total_ns,
            "loader_restart_fork_ns": r.fork_ns, "persistent_fill_ns": r.fill_ns,
            "loop_step_ns": per, "run_steps": r.steps, "run_ns": acc.run_ns}),
        fix=Fix(title="Keep the DataLoader's workers alive between epochs",
                snippet="loader = DataLoader(dataset, ..., num_workers=N, "
                        "persistent_workers=True)", kind="config",
                knobs=("loader:persistent_workers=true",)),
        estimate=Estimate(
            step_ns=per, predicted_step_ns=after, speedup=r.speedup(),
            low=r.speedup(r.fork_ns), high=r.speedup(max(r.fork_ns, r.total_ns)),
            model=("the settled loop's time per step, epoch starts included, less each "
                   "restart's measured cost (its forks and the steps over the settled mean "
                   "until the prefetch queue is refilled) at the run's rate of restarts, less "
                   "what persistent workers still pay (their first round: N x the step's own "
                   "time per restarted iterator)"),
            assumptions=("low: only the forks are saved (the fresh workers' first batches "
                         "cost warm ones as much)",
                         "high: the whole epoch start is saved (warm workers' first round "
                         "hidden)"),
            basis="mean", relative_to="run"),
        confidence=Confidence.MODELED)


def run_findings(acc: RunAccount | None, restarts: RestartCost | None = None) -> list[Finding]:
    """Findings about time outside steady steps, each estimated against the whole run;
    ``restarts``: the loader's epoch starts (`epoch_restarts`), for the persistent-workers fix."""
    if acc is None or acc.run_ns <= 0:
        return []
    out: list[Finding] = []
    steps = tuple(s.index for s in acc.slow_steps[:20])
    share = lambda ns: ns / acc.run_ns  # noqa: E731
    if restarts is not None and restarts.restarts:
        found = _restart_finding(acc, restarts, steps)
        if found is not None:
            out.append(found)
    ckpt = sum(a for c, a in acc.causes_ns.items() if c == "checkpoint")
    if acc.checkpoints and share(ckpt) >= MIN_RUN_SAVING:
        out.append(Finding(
            rule="blocking-checkpoints", code="RUN002",
            message=(f"{acc.checkpoints} torch.save call(s) blocked the loop for "
                     f"{ckpt / 1e9:.2f} s ({share(ckpt):.0%} of the run)"),
            evidence=Evidence(steps=steps, quantities={"checkpoints": acc.checkpoints,
                                                       "checkpoint_ns": ckpt, "run_ns": acc.run_ns}),
            fix=Fix(title="Checkpoint less often, or asynchronously",
                    snippet="import torch.distributed.checkpoint as dcp\n"
                            "future = dcp.async_save(state_dict, checkpoint_id=path)  "
                            "# training goes on; future.result() before the next save"),
            estimate=_estimate(acc, ckpt, 0.5 * ckpt,
                               "whole run wall time less the measured time the loop spent in "
                               "torch.save (high: fully asynchronous; low: half as often)",
                               ("the state is copied off the GPU quickly relative to writing it",)),
            confidence=Confidence.MODELED))
    ev = acc.causes_ns.get("eval", 0)
    if share(ev) >= 2 * MIN_RUN_SAVING:  # halving the evaluation saves half of it
        out.append(Finding(
            rule="frequent-evaluation", code="RUN003",
            message=(f"evaluation passes took {ev / 1e9:.2f} s ({share(ev):.0%} of the run) "
                     "between training steps"),
            evidence=Evidence(steps=steps, quantities={"eval_ns": ev, "run_ns": acc.run_ns}),
            fix=Fix(title="Evaluate half as often (or on fewer batches)",
                    snippet="eval_interval *= 2  # or: fewer evaluation batches per pass",
                    kind="config"),
            estimate=_estimate(acc, 0.5 * ev, 0.25 * ev,
                               "whole run wall time less half the measured evaluation time",
                               ("evaluation cost scales with how often and on how much data "
                                "it runs",)),
            confidence=Confidence.HEURISTIC))
    return out
