"""Each check-set scenario's fix timed in separate process runs: a table and ``repeats.json``.

    python benchmarks/public/repeats_table.py RUNS_DIR [--write fixtures/scenarios-check/repeats.json]

RUNS_DIR holds ``run<k>/<rule>/<variant>/timing.json`` (benchmarks/public/wave5_repeats.sh, one
fresh process per file). A run's step is the mean of its timed steps without the first, the same
statistic as the captures' (`tests.validation_data.mean_ms`); the fix's speedup is the median bad
run over the median good run, and the table shows each variant's spread between runs (max - min
over the median) and the speedup's range (slowest good run against fastest bad run, and the
reverse). ``--write`` merges the runs into a set's ``repeats.json``, which
`tests.validation_data.measured_speedup` reads (from 3 runs per variant on).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.validation_data import MIN_RUNS, mean_ms  # noqa: E402


def collect(runs_dir: Path) -> dict[str, dict[str, list[float]]]:
    """rule -> variant -> each run's mean step (ms), runs in order."""
    out: dict[str, dict[str, list[float]]] = {}
    for run in sorted(runs_dir.glob("run*"), key=lambda p: p.name):
        for timing in sorted(run.glob("*/*/timing.json")):
            rule, variant = timing.parent.parent.name, timing.parent.name
            ms = mean_ms(json.loads(timing.read_text()))
            out.setdefault(rule, {}).setdefault(variant, []).append(round(ms, 4))
    return out


def table(runs: dict[str, dict[str, list[float]]]) -> list[str]:
    lines = [f"{'rule':24} {'runs':>4} {'bad ms (spread)':>18} {'good ms (spread)':>18} "
             f"{'speedup':>8} {'range':>11}"]
    for rule, v in sorted(runs.items()):
        bad, good = v.get("bad", []), v.get("good", [])
        if not bad or not good:
            lines.append(f"{rule:24} incomplete: bad {len(bad)} runs, good {len(good)}")
            continue
        mb, mg = statistics.median(bad), statistics.median(good)
        sb, sg = (max(bad) - min(bad)) / mb, (max(good) - min(good)) / mg
        n = min(len(bad), len(good))
        lines.append(f"{rule:24} {n:>4} {mb:9.3f} ({sb:5.1%}) {mg:9.3f} ({sg:5.1%}) {mb / mg:7.3f}x "
                     f"{min(bad) / max(good):5.2f}-{max(bad) / min(good):.2f}"
                     + ("" if n >= MIN_RUNS else f"  (fewer than {MIN_RUNS} runs: not used)"))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs_dir", type=Path)
    ap.add_argument("--write", type=Path, help="merge into this repeats.json")
    args = ap.parse_args()
    if not args.runs_dir.is_dir():
        print(f"error: {args.runs_dir} is not a folder", file=sys.stderr)
        return 2
    runs = collect(args.runs_dir)
    if not runs:
        print(f"error: no run*/<rule>/<variant>/timing.json under {args.runs_dir}", file=sys.stderr)
        return 2
    print("\n".join(table(runs)))
    if args.write:
        data = json.loads(args.write.read_text()) if args.write.exists() else {
            "description": "each check-set variant's mean step (ms, first timed step left out) in "
                           "separate process runs on one H100: benchmarks/public/wave5_repeats.sh",
            "rules": {}}
        data["rules"].update(runs)
        args.write.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
