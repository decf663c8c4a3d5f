"""Reported vs measured step time for every H100 scenario capture.

For each fixtures/scenarios/<rule>/<variant>/, prints the mean step time measured without a
profiler (timing.json, first timed step left out) beside what advisor reports from the nsys
export and the torch.profiler trace: the trace's own step time and the step replayed without
the profiler's host overhead.

    python benchmarks/step_time_check.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_rules import SCENARIOS, _mean_ms


def main() -> int:
    from advisor.analysis import analyze

    print(f"{'capture':32} {'measured':>9} | {'nsys trace':>10} {'unprofiled':>10} {'err':>6} | "
          f"{'kineto trace':>12} {'unprofiled':>10} {'err':>6}")
    for d in sorted(p for p in SCENARIOS.glob("*/*") if (p / "timing.json").exists()):
        measured = _mean_ms(json.loads((d / "timing.json").read_text()))
        cells = []
        for name in ("nsys.sqlite.gz", "trace.json.gz"):
            a = analyze(d / name)
            trace = a.summary.mean_step_ns / 1e6
            unprof = (a.results.replay.unprofiled_mean_ns or a.summary.mean_step_ns) / 1e6
            cells.append((trace, unprof, (unprof - measured) / measured))
        (nt, nu, ne), (kt, ku, ke) = cells
        print(f"{d.parent.name + '/' + d.name:32} {measured:8.2f}  | {nt:10.2f} {nu:10.2f} {ne:+6.0%} | "
              f"{kt:12.2f} {ku:10.2f} {ke:+6.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
