"""CPU cost of analysing a window on its measured baseline, the inputs fixed first (issue 31).

`advisor profile` now measures its steps and chooses the calibration before one rule pass
(`advisor.capture.baseline.measured_inputs`: one extra replay to compare, the fit when needed).
Before, it ran the rules, then on a refit the fit and a whole second rule pass. Both costs are
built here from the same parts, timed on fixture runs that kept their steps file:

    python benchmarks/profile_baseline_cost.py fixtures/unprofiled/h100-2026-11-23d/run1/nanogpt-kineto ...
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _timed(fn, *args):
    t = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t


def main(runs: list[str]) -> None:
    from advisor.analysis import analyze_input, rule_pass
    from advisor.capture.baseline import measured_inputs
    from advisor.capture.reporting import recorded_inputs
    from advisor.capture.steptimes import StepClock
    from advisor.engine.context import analysed_steps
    from advisor.engine.host import HostFacts
    from advisor.engine.profiler_fit import fit_to_step

    print(f"{'run':40s} {'fit':10s} {'inputs':>7s} {'rules':>6s} {'fit':>5s} {'new':>6s} {'old':>6s} (CPU s)")
    for arg in runs:
        run = Path(arg)
        trace = next(p for p in sorted(run.iterdir()) if p.name.startswith("trace_rank0"))
        state = json.loads((run / "steps_rank0.json").read_text())["state"]
        inputs = recorded_inputs(trace, state["recorded"], facts=HostFacts.from_state(state))
        fixed, t_inputs = _timed(measured_inputs, inputs, StepClock.from_state(state))
        ruled, t_rules = _timed(rule_pass, fixed)
        _, t_apply = _timed(analyze_input, fixed, ruled)
        accepted, tried = fixed.calibration != inputs.calibration, fixed.measured.fit_tried
        t_fit = 0.0
        if tried:
            _, t_fit = _timed(fit_to_step, inputs.graph, analysed_steps(inputs.graph),
                              inputs.calibration, fixed.measured.step.median_ns)
        new = t_inputs + t_rules + t_apply
        old = t_rules + t_fit + (t_rules if accepted else 0.0) + t_apply
        fit = "accepted" if accepted else ("refused" if tried else "not needed")
        name = f"{run.parent.name}/{run.name}"
        print(f"{name:40s} {fit:10s} {t_inputs:7.2f} {t_rules:6.2f} {t_fit:5.2f} {new:6.2f} {old:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
