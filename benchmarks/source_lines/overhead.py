"""What recording Python stacks costs inside `advisor profile`'s window, and how well removing it
predicts the unprofiled step (issue #19).

    python benchmarks/source_lines/overhead.py fit DIR     # per-event costs of with_stack
    python benchmarks/source_lines/overhead.py check DIR   # captures: replay vs measured step

DIR is what `device_run.sh` here returns (fixtures/source-lines holds the same files):
``cal-plain/plain.json`` (calibration workloads timed without a profiler),
``cal-kineto-stack/*.json.gz`` (the same workloads traced with ``with_stack=True``) and
``traces/<name>/trace_rank0.json.gz`` + ``analysis_rank0.json`` (`advisor profile` captures,
whose ``steps.measured`` is the step measured outside the window, without a profiler).

``fit`` solves (traced step replayed as recorded - plain step) = calls x call_ns + operators x
op_ns + Python calls x py_ns over the three workloads (non-negative least squares: with three
workloads and three costs this is the exact solution; the captures of ``check`` are disjoint
from it and are the test). ``check`` prints, per capture, the traced step, the step replayed
without the calibrated overhead, the measured unprofiled step and the error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def fit(root: Path) -> int:
    import numpy as np
    from scipy.optimize import nnls

    from advisor.analysis import analyze
    from advisor.engine.context import analysed_steps
    from advisor.engine.profiler_cost import NO_CALIBRATION, per_step_counts
    from advisor.engine.profiler_fit import replay_median_ns

    plain = json.loads((root / "cal-plain" / "plain.json").read_text())["results"]
    rows = []
    for w, r in plain.items():
        trace = root / "cal-kineto-stack" / f"{w}-kineto-stack.json.gz"
        if not trace.exists():
            continue
        an = analyze(trace)
        counts = per_step_counts(an.graph, analysed_steps(an.graph))
        raw = replay_median_ns(an.graph, NO_CALIBRATION)
        rows.append((w, r["median_ms"], raw / 1e6, counts))
    cols = ("calls", "ops", "pys")
    x = np.array([[c[k] for k in cols] for *_, c in rows], dtype=float)
    y = np.array([(raw - pl) * 1e6 for _, pl, raw, _ in rows])
    coef, _ = nnls(x, y)
    print("with_stack costs: " + ", ".join(f"{k} {v / 1e3:.1f} us" for k, v in zip(cols, coef, strict=True)))
    print("| workload | plain ms | traced ms | calls | operators | Python calls | overhead ms | fit ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (w, pl, raw, c), pred in zip(rows, x @ coef, strict=True):
        print(f"| {w} | {pl:.3f} | {raw:.3f} | {c['calls']:.0f} | {c['ops']:.0f} | {c['pys']:.0f} | "
              f"{raw - pl:.3f} | {pred / 1e6:.3f} |")
    return 0


def check(root: Path) -> int:
    from advisor.analysis import analyze
    from advisor.engine.context import analysed_steps
    from advisor.engine.profiler_cost import detect, per_step_counts

    print("| capture | stacks | traced ms | replay without overhead ms | measured unprofiled ms | "
          "error | Python calls/step |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for d in sorted((root / "traces").iterdir()):
        trace, result = d / "trace_rank0.json.gz", d / "analysis_rank0.json"
        if not trace.exists() or not result.exists():
            continue
        measured = (json.loads(result.read_text())["steps"].get("measured") or {}).get("median_ms")
        an = analyze(trace)
        cal = detect(an.graph)
        predicted = (an.results.replay.unprofiled_median_ns or 0) / 1e6
        counts = per_step_counts(an.graph, analysed_steps(an.graph))
        err = f"{(predicted - measured) / measured:+.0%}" if measured else "-"
        print(f"| {d.name} | {'yes' if 'stack' in cal.config else 'no'} | "
              f"{an.summary.median_step_ns / 1e6:.2f} | {predicted:.2f} | "
              f"{measured if measured is not None else '-'} | {err} | {counts['pys']:.0f} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["fit", "check"])
    ap.add_argument("dir", type=Path)
    a = ap.parse_args()
    return fit(a.dir) if a.what == "fit" else check(a.dir)


if __name__ == "__main__":
    sys.exit(main())
