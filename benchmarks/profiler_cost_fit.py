"""Fit and check torch.profiler's host cost per event (shapes and stacks) on real workloads.

A bare torch.profiler trace holds the step as the profiler slowed it; `advisor analyze` takes
the profiler's cost out per CUDA call, per operator and per Python call
(`advisor.engine.profiler_cost`) and replays the step. This script fits those three costs to
captures whose step was also measured without the profiler, in the same process: the steps
`advisor profile` timed outside its window (``steps_rank0.json``). It fits by the replay itself
(least squares of the relative error of the replayed step), not by a line through event counts:
the replay takes a cost out only where the host was on the step's critical path and only from
host time that was there, so the two differ.

Why real workloads and not the single-event ones of `profiler_calibration.py`: on the H100
those measure 0.2-0.5 us per Python call, about 4 us per operator and 8 us more per launch, and
with them the replay of the real workloads removes too little (+13 to +82%): framework code
costs the tracer more per event than a loop of one call does. The single-event captures stay
in the results as the mechanism's floor.

    python benchmarks/profiler_cost_fit.py rows DIR [DIR ...]     # per capture: counts, steps
    python benchmarks/profiler_cost_fit.py fit DIR [DIR ...]      # fit, leave-one-out checks
    python benchmarks/profiler_cost_fit.py python-cost CAPTURE...  # compiled steps' Python cost
    python benchmarks/profiler_cost_fit.py cut SRC DEST --steps 4 # keep a capture's first steps

``fit`` prints, for every capture, the error of the replay with the costs shipped in
`profiler_cost.CALIBRATIONS`, with the costs fitted on all captures, with the costs fitted
without that workload (both runs of it left out), and with the costs fitted on the other
device run only: the last two are the errors to expect on a trace the fit has not seen.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.engine.profiler_cost_data import CONFIG, Capture, captures

STEP_NAME = re.compile(r"(step \d+|ProfilerStep#\d+)")
def fit_costs(caps: list[Capture]) -> tuple[float, float, float]:
    """Costs (us per CUDA call, per operator, per Python call) minimising the replay's
    relative errors over ``caps``."""
    from scipy.optimize import least_squares

    def residuals(v):
        return [c.error(*v) for c in caps]
    res = least_squares(residuals, x0=[15.0, 1.5, 1.0], bounds=([0, 0, 0], [40, 10, 5]),
                        diff_step=0.05, max_nfev=30)
    return tuple(float(x) for x in res.x)


def cmd_rows(a: argparse.Namespace) -> int:
    from advisor.engine import profiler_cost as pc
    from advisor.engine.profiler_fit import replay_median_ns

    for name, d in captures(a.dirs):
        c = Capture(name, d)
        counts = pc.per_step_counts(c.graph, c.steps)
        raw = replay_median_ns(c.graph, pc.NO_CALIBRATION, c.steps) / 1e6
        print(f"{name:45} measured {c.measured_ms:7.2f} ms ({c.n_measured} steps)  traced "
              f"{raw:7.2f}  calls {counts['calls']:5.0f}  ops {counts['ops']:5.0f}  "
              f"python {counts['pys']:5.0f}")
    return 0


def cmd_fit(a: argparse.Namespace) -> int:
    from advisor.engine.profiler_cost import CALIBRATIONS

    caps = [Capture(n, d) for n, d in captures(a.dirs)]
    shipped = CALIBRATIONS[CONFIG]
    ship = (shipped.call_ns / 1e3, shipped.op_ns / 1e3, shipped.py_ns / 1e3)
    every = fit_costs(caps)
    print(f"fitted on all {len(caps)} captures: {every[0]:.2f} us per CUDA call, "
          f"{every[1]:.2f} per operator, {every[2]:.2f} per Python call", flush=True)
    held_workload = {}
    for w in sorted({c.workload for c in caps}):
        costs = fit_costs([c for c in caps if c.workload != w])
        for c in caps:
            if c.workload == w:
                held_workload[c.name] = c.error(*costs)
    held_run = {}
    runs = sorted({c.name.split("/")[0] for c in caps})
    if len(runs) > 1:
        for r in runs:
            costs = fit_costs([c for c in caps if not c.name.startswith(r + "/")])
            for c in caps:
                if c.name.startswith(r + "/"):
                    held_run[c.name] = c.error(*costs)
    print("\n| capture | measured ms | shipped costs | fitted on all | workload left out "
          "| run left out |\n|---|---:|---:|---:|---:|---:|")
    cols: dict[str, list[float]] = {"shipped": [], "all": [], "workload": [], "run": []}
    for c in caps:
        e = {"shipped": c.error(*ship), "all": c.error(*every),
             "workload": held_workload[c.name], "run": held_run.get(c.name)}
        for k, v in e.items():
            if v is not None:
                cols[k].append(v)
        cell = {k: "–" if v is None else f"{v:+.1%}" for k, v in e.items()}
        print(f"| {c.name} | {c.measured_ms:.2f} | {cell['shipped']} | {cell['all']} | "
              f"{cell['workload']} | {cell['run']} |")
    summary = " | ".join(
        f"{k}: max {max(map(abs, v)):.1%}, rms {statistics.fmean(x * x for x in v) ** 0.5:.1%},"
        f" within 10% {sum(abs(x) <= 0.10 for x in v)}/{len(v)}" for k, v in cols.items() if v)
    print(f"\n{summary}")
    return 0


def exact_python_cost(c: Capture, call_us: float, op_us: float) -> float:
    """The cost per Python call (us) that makes ``c``'s replay take its measured step, with the
    other two costs held (bisection: the replay shortens as the cost grows)."""
    lo, hi = 0.0, 40.0
    for _ in range(25):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if c.error(call_us, op_us, mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def cmd_python_cost(a: argparse.Namespace) -> int:
    """The Python-call cost of the compiled captures (`profiler_cost.COMPILED_PY_NS`): each
    capture's exact cost, their mean, and each capture's error with the mean of the others."""
    from advisor.engine.profiler_cost import CALIBRATIONS

    ship = CALIBRATIONS[CONFIG]
    call_us, op_us = ship.call_ns / 1e3, ship.op_ns / 1e3
    caps = [Capture(f"{d.parent.name}/{d.name}", d) for d in a.captures]
    exact = [exact_python_cost(c, call_us, op_us) for c in caps]
    mean = statistics.fmean(exact)
    print(f"mean {mean:.2f} us per Python call (call {call_us:g}, operator {op_us:g} held)")
    held = []
    for i, c in enumerate(caps):
        others = statistics.fmean(x for j, x in enumerate(exact) if j != i)
        held.append(c.error(call_us, op_us, others))
        print(f"  {c.name:45} measured {c.measured_ms:7.2f} ms  exact {exact[i]:5.2f} us  "
              f"with the mean {c.error(call_us, op_us, mean):+.1%}  with the others' mean "
              f"{held[-1]:+.1%}  with the eager cost {c.error(call_us, op_us, ship.py_ns / 1e3):+.1%}")
    print(f"left out: RMS {statistics.fmean(e * e for e in held) ** 0.5:.1%}")
    return 0


def cmd_cut(a: argparse.Namespace) -> int:
    """Keep a capture's first ``--steps`` step ranges (and everything that starts among them):
    what the replay reads, at a fraction of the size."""
    a.dest.mkdir(parents=True, exist_ok=True)
    doc = json.loads(gzip.decompress((a.src / "trace_rank0.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("ph") == "X"
                   and e.get("cat") == "user_annotation" and STEP_NAME.fullmatch(e["name"]))
    lo, hi = steps[0][0], steps[min(a.steps, len(steps)) - 1][1]
    doc["traceEvents"] = [e for e in ev if "ts" not in e or e.get("ph") == "M"
                          or lo <= float(e["ts"]) <= hi]
    with gzip.open(a.dest / "trace_rank0.json.gz", "wt", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))
    for name in ("steps_rank0.json", "log.txt"):
        if (a.src / name).exists():
            (a.dest / name).write_bytes((a.src / name).read_bytes())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("rows", "fit"):
        p = sub.add_parser(name)
        p.add_argument("dirs", type=Path, nargs="+")
    p = sub.add_parser("python-cost")
    p.add_argument("captures", type=Path, nargs="+")
    p = sub.add_parser("cut")
    p.add_argument("src", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    return {"rows": cmd_rows, "fit": cmd_fit, "python-cost": cmd_python_cost,
            "cut": cmd_cut}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
