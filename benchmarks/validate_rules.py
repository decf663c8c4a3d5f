"""Rule validation table: measured H100 speedup of each planted fix vs advisor's estimate.

For every scenario in fixtures/scenarios/<rule>/ (captured on an H100 by
benchmarks/scenarios/capture.py) this analyses the bad variant's nsys export and torch.profiler
trace, takes the finding of the scenario's rule, and compares its estimate with the measured
speedup (mean step time of bad / good, >= 30 steps without any profiler) twice: as a speedup
ratio (within a factor 1.3) and as a gain, the estimated share of the step saved against the
measured one (within 30% relative, or the rule's stated ``GAIN_TOLERANCE``). It also checks
that the rule is the bad trace's top finding and that the good trace does not raise it.

    python benchmarks/validate_rules.py            # prints the table (fit and check sets)
    python benchmarks/validate_rules.py --set check --json out.json
    python benchmarks/validate_rules.py --markdown # the table in docs/validation.md

Two sets of captures: ``fit`` (fixtures/scenarios, the captures the model's constants were
fitted on: fused-attention time, FP8 and FP32 GEMM rates, graph launch cost, profiler
overheads) and ``check`` (fixtures/scenarios-check, the same scenarios at other shapes,
captured afterwards, on which nothing was fitted). The check set's error is the honest one.
The comparison itself lives in tests/validation_data.py, which the tests use too.

Where a set has ``repeats.json`` (each variant's mean step in >= 3 separate process runs:
benchmarks/public/wave5_repeats.sh, then benchmarks/public/repeats_table.py), the measured
speedup is the median over the runs and the table shows the range the runs span; else it is the
capture's single timing run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.validation_data import (  # noqa: E402
    SETS,
    Row,
    gain_bound,
    markdown_cells,
    saving,
    scenario_dirs,
    validate,
)


def rows_for(set_arg: str, rules: list[str], tmp: Path) -> list[tuple[str, Row]]:
    """(set, row) for every scenario and format captured, in table order."""
    out: list[tuple[str, Row]] = []
    for name in SETS:
        if set_arg not in (name, "both"):
            continue
        for rule_dir in scenario_dirs(name):
            if rules and rule_dir.name not in rules:
                continue
            for fmt in ("nsys", "kineto"):
                row = validate(rule_dir, fmt, tmp / name)
                if row:
                    out.append((name, row))
    return out


def _measured(r: Row) -> str:
    """The measured speedup with its process runs: ``1.12x`` (one run), or the median over
    runs with the range they span, ``1.12x (3 runs 1.10-1.15)`` (`repeat_runs`)."""
    if r.spread is None:
        return f"{r.measured:.2f}x"
    return f"{r.measured:.2f}x ({r.runs} runs {r.spread[0]:.2f}-{r.spread[1]:.2f})"


def _print_text(rows: list[tuple[str, Row]]) -> None:
    print(f"{'set':5} {'rule':24} {'trace':7} {'measured':>24} {'estimated':>10} {'range':>13} "
          f"{'est/meas':>9} {'gain m/e':>11} {'gain err':>8} {'top finding':24} {'good clean':>10}  ok")
    for name, r in rows:
        est = f"{r.estimated:.3f}x" if r.estimated else "-"
        rng = f"{r.low:.2f}-{r.high:.2f}" if r.low else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio else "-"
        gains = f"{saving(r.measured):.0%}/{saving(r.estimated):.0%}" if r.estimated else "-"
        err = f"{r.gain_error:+.0%}" if r.gain_error is not None else "-"
        print(f"{name:5} {r.rule:24} {r.fmt:7} {_measured(r):>24} {est:>10} {rng:>13} {ratio:>9} "
              f"{gains:>11} {err:>8} {(r.top_rule or '-'):24} "
              f"{({None: '-', False: 'yes', True: 'NO'}[r.good_raises]):>10}  {'yes' if r.ok else 'NO'}")


def _print_markdown(rows: list[tuple[str, Row]]) -> None:
    print("| set | rule | measured | gain measured | gain bound | nsys estimate (range) | est/meas "
          "| nsys gain (error) | torch.profiler estimate (range) | est/meas | torch.profiler gain (error) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = list(dict.fromkeys((n, r.rule) for n, r in rows))
    by = {(n, r.rule, r.fmt): r for n, r in rows}
    for name, rule in keys:
        nsys, kin = by.get((name, rule, "nsys")), by.get((name, rule, "kineto"))
        row = nsys or kin
        m = row.measured  # type: ignore[union-attr]
        print(f"| {name} | {rule} | {_measured(row)} | {saving(m):.1%} | {gain_bound(rule):.0%} | "  # type: ignore[arg-type]
              + " | ".join(markdown_cells(nsys) + markdown_cells(kin)) + " |")


def _summary(rows: list[tuple[str, Row]]) -> None:
    for name in dict.fromkeys(n for n, _ in rows):
        mine = [r for n, r in rows if n == name and r.ratio]
        errs = sorted(abs(r.ratio - 1) for r in mine)  # type: ignore[operator]
        gerrs = sorted(abs(r.gain_error) for r in mine)  # type: ignore[arg-type]
        print(f"{name}: {len(mine)} estimates, median |est/meas - 1| = {errs[len(errs) // 2]:.0%}, "
              f"max {errs[-1]:.0%} ({sum(r.speedup_ok for r in mine)} within 1.3x); median gain "
              f"error {gerrs[len(gerrs) // 2]:.0%}, max {gerrs[-1]:.0%} "
              f"({sum(r.gain_ok for r in mine)} within their gain bound)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the docs/validation.md table")
    ap.add_argument("--set", choices=[*SETS, "both"], default="both", help="which captures")
    ap.add_argument("rules", nargs="*", help="only these scenarios")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = rows_for(args.set, args.rules, Path(tmp))
    (_print_markdown if args.markdown else _print_text)(rows)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"set": n, "ok": r.ok, "gain_error": r.gain_error}
                                         for n, r in rows], indent=2))
    _summary(rows)
    return 0 if rows and all(r.ok for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
