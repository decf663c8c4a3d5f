"""Rule validation table: measured H100 speedup of each planted fix vs advisor's estimate.

For every scenario in fixtures/scenarios/<rule>/ (captured on an H100 by
benchmarks/scenarios/capture.py) this analyses the bad variant's nsys export and torch.profiler
trace, takes the finding of the scenario's rule, and compares its estimated speedup with the
measured one (mean step time of bad / good, >= 30 steps without any profiler). It also checks
that the rule is the bad trace's top finding and that the good trace does not raise it.

    python benchmarks/validate_rules.py            # prints the table (fit and check sets)
    python benchmarks/validate_rules.py --set check --json out.json

Two sets of captures: ``fit`` (fixtures/scenarios, the captures the model's constants were
fitted on: fused-attention time, FP8 and FP32 GEMM rates, graph launch cost, profiler
overheads) and ``check`` (fixtures/scenarios-check, the same scenarios at other shapes,
captured afterwards, on which nothing was fitted). The check set's error is the honest one.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "fixtures" / "scenarios"
SETS = {"fit": SCENARIOS, "check": ROOT / "fixtures" / "scenarios-check"}
TOLERANCE = 1.3  # the estimate must be within this factor of the measured speedup


@dataclass
class Row:
    rule: str
    fmt: str
    measured: float
    estimated: float | None
    low: float | None
    high: float | None
    top_rule: str | None
    good_raises: bool | None  # None: the fixed variant was not captured in this format
    bad_findings: list[str]

    @property
    def ratio(self) -> float | None:
        return None if not self.estimated else self.estimated / self.measured

    @property
    def ok(self) -> bool:
        r = self.ratio
        return (r is not None and 1 / TOLERANCE <= r <= TOLERANCE and self.top_rule == self.rule
                and not self.good_raises)


def measured_speedup(rule_dir: Path) -> float:
    bad = json.loads((rule_dir / "bad" / "timing.json").read_text())
    good = json.loads((rule_dir / "good" / "timing.json").read_text())
    return _mean_ms(bad) / _mean_ms(good)


def _mean_ms(timing: dict) -> float:
    """Mean step time of an unprofiled run. The first timed step is left out: it carries the
    harness's own first-call costs (numpy's lazy initialisation cost 55-72 ms in
    loader-jitter's runs), which are not the training step's."""
    steps = timing.get("per_step_ms")
    if steps and len(steps) > 10:
        return float(sum(steps[1:]) / (len(steps) - 1))
    for key in ("step_ms_cuda_events", "event_ms", "step_ms"):
        if key in timing and isinstance(timing[key], dict) and "mean" in timing[key]:
            return float(timing[key]["mean"])
    if "mean_ms" in timing:
        return float(timing["mean_ms"])
    raise KeyError(f"no mean step time in timing.json (keys: {sorted(timing)})")


def trace_path(variant_dir: Path, fmt: str, tmp: Path) -> Path | None:
    if fmt == "kineto":
        p = variant_dir / "trace.json.gz"
        return p if p.exists() else None
    p = variant_dir / "nsys.sqlite.gz"
    if not p.exists():
        return None
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / f"{variant_dir.parent.name}-{variant_dir.name}.sqlite"
    if not out.exists():
        with gzip.open(p, "rb") as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def validate(rule_dir: Path, fmt: str, tmp: Path) -> Row | None:
    from advisor.analysis import analyze

    rule = rule_dir.name
    bad_path = trace_path(rule_dir / "bad", fmt, tmp)
    good_path = trace_path(rule_dir / "good", fmt, tmp)
    if bad_path is None:
        return None
    bad = analyze(bad_path)
    good = analyze(good_path) if good_path is not None else None
    mine = [f for f in bad.results.findings if f.rule == rule]
    return Row(
        rule=rule,
        fmt=fmt,
        measured=measured_speedup(rule_dir),
        estimated=mine[0].estimate.speedup if mine else None,
        low=mine[0].estimate.low if mine else None,
        high=mine[0].estimate.high if mine else None,
        top_rule=bad.results.findings[0].rule if bad.results.findings else None,
        good_raises=None if good is None else any(f.rule == rule for f in good.results.findings),
        bad_findings=[f"{f.rule} {f.estimate.speedup:.2f}x" for f in bad.results.findings],
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--set", choices=[*SETS, "both"], default="both", help="which captures")
    ap.add_argument("rules", nargs="*", help="only these scenarios")
    args = ap.parse_args()
    rows: list[Row] = []
    sets: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, root in SETS.items():
            if args.set not in (name, "both"):
                continue
            for rule_dir in sorted(p for p in root.iterdir() if p.is_dir()):
                if args.rules and rule_dir.name not in args.rules:
                    continue
                for fmt in ("nsys", "kineto"):
                    row = validate(rule_dir, fmt, Path(tmp) / name)
                    if row:
                        rows.append(row)
                        sets.append(name)
    print(f"{'set':5} {'rule':24} {'trace':7} {'measured':>9} {'estimated':>10} {'range':>13} "
          f"{'est/meas':>9} {'top finding':24} {'good clean':>10}  ok")
    for name, r in zip(sets, rows, strict=True):
        est = f"{r.estimated:.3f}x" if r.estimated else "-"
        rng = f"{r.low:.2f}-{r.high:.2f}" if r.low else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio else "-"
        print(f"{name:5} {r.rule:24} {r.fmt:7} {r.measured:8.3f}x {est:>10} {rng:>13} {ratio:>9} "
              f"{(r.top_rule or '-'):24} {({None: '-', False: 'yes', True: 'NO'}[r.good_raises]):>10}  "
              f"{'yes' if r.ok else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"set": n, "ok": r.ok}
                                         for n, r in zip(sets, rows, strict=True)], indent=2))
    for name in dict.fromkeys(sets):
        errs = [abs(r.ratio - 1) for n, r in zip(sets, rows, strict=True) if n == name and r.ratio]
        if errs:
            print(f"{name}: {len(errs)} estimates, median |est/meas - 1| = "
                  f"{sorted(errs)[len(errs) // 2]:.0%}, max {max(errs):.0%}")
    return 0 if rows and all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
