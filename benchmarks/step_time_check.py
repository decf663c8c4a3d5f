"""Reported vs measured step time for every H100 scenario capture.

For each fixtures/scenarios/<rule>/<variant>/, prints the mean step time measured without a
profiler (timing.json, first timed step left out) against what advisor reports from the nsys
export and the torch.profiler trace (the step replayed without the profiler's host overhead),
and how many land within 10%: the figure README.md quotes (tests/test_readme.py checks it).

    python benchmarks/step_time_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.validation_data import STEP_TIME_BAND, step_time_errors


def main() -> int:
    errors = {fmt: step_time_errors(fmt) for fmt in ("nsys", "kineto")}
    print(f"{'capture':36} {'nsys err':>9} {'kineto err':>11}")
    for capture in sorted(set(errors["nsys"]) | set(errors["kineto"])):
        cells = [f"{errors[f][capture]:+.0%}" if capture in errors[f] else "-" for f in ("nsys", "kineto")]
        print(f"{capture:36} {cells[0]:>9} {cells[1]:>11}")
    for fmt, errs in errors.items():
        within = sum(abs(e) <= STEP_TIME_BAND for e in errs.values())
        print(f"{fmt}: {within} of {len(errs)} captures within {STEP_TIME_BAND:.0%} of the measured step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
