"""torch.profiler-with-stacks captures whose step was also measured without the profiler: what
tests/engine/test_stack_calibration.py checks the shipped costs on and what
benchmarks/profiler_cost_fit.py fits them on. Here, not in benchmarks/, because tests never
import from benchmarks/ (issue 31 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.archive import readable, stored

CONFIG = ("torch.profiler", "shapes,stack")


def measured_outside(capture: Path) -> tuple[float, int]:
    """The unprofiled step `advisor profile` measured in that run (ms) and over how many steps:
    its own `advisor.capture.steptimes.measured_step` of the state it left (steps after warm-up,
    away from the window, far outliers out), the baseline its report used."""
    from advisor.capture.steptimes import StepClock, measured_step

    state = json.loads((capture / "steps_rank0.json").read_text())["state"]
    m = measured_step(StepClock.from_state(state))
    if m is None:
        raise SystemExit(f"{capture}: too few steps measured outside the window")
    return m.median_ns / 1e6, m.count


def captures(dirs: list[Path]) -> list[tuple[str, Path]]:
    """(run/name, capture dir) of every `advisor profile` capture with stacks in ``dirs`` (an
    archived capture's trace is ``trace_rank0.json.xz`` there: `Capture` unpacks it)."""
    out = []
    for root in dirs:
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            if stored(d / "trace_rank0.json.gz").exists() and (d / "steps_rank0.json").exists() \
                    and not d.name.endswith("nostack"):
                out.append((f"{root.name}/{d.name}", d))
    return out


class Capture:
    """One capture loaded once: its graph, analysed steps and measured step."""

    def __init__(self, name: str, d: Path) -> None:
        from advisor.engine.context import analysed_steps
        from advisor.ingest.base import load_trace

        self.name, self.workload = name, name.split("/", 1)[1]
        self.graph = load_trace(readable(d / "trace_rank0.json.gz"))
        self.steps = analysed_steps(self.graph)
        self.measured_ms, self.n_measured = measured_outside(d)

    def error(self, call_us: float, op_us: float, py_us: float) -> float:
        from advisor.engine import profiler_cost as pc
        from advisor.engine.profiler_fit import replay_median_ns

        cal = pc.Calibration(*CONFIG, int(call_us * 1e3), int(op_us * 1e3), "fit",
                             py_ns=int(py_us * 1e3))
        return replay_median_ns(self.graph, cal, self.steps) / 1e6 / self.measured_ms - 1
