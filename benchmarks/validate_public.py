"""Estimates vs speedups measured on public training scripts and the planted GPT routes (H100).

    python benchmarks/validate_public.py

Reads fixtures/public/<case>/{nsys.sqlite.gz, trace.json.gz} and fixtures/public/measured.json
(captured by benchmarks/public/device_run.sh and device_run_hf.sh) and prints, per fix applied
with the framework's own knob, the measured speedup and advisor's estimate from each trace format.
"""

from __future__ import annotations

import sys
from pathlib import Path

from advisor.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.validation_data import PUBLIC, PUBLIC_ROWS, public_speedup  # noqa: E402

ROWS = PUBLIC_ROWS


def main() -> None:
    cache: dict[Path, object] = {}
    print(f"{'case':20} {'fix':26} {'rule':16} {'measured':>9} {'nsys est':>9} {'ratio':>6} "
          f"{'kineto est':>10} {'ratio':>6}  top finding (nsys / kineto)")
    for case, fix, rule, before, after in ROWS:
        meas = public_speedup(case, before, after)
        cells, tops = [], []
        for name in ("nsys.sqlite.gz", "trace.json.gz"):
            p = PUBLIC / case / name
            a = cache.get(p) or cache.setdefault(p, analyze(p))
            f = next((x for x in a.results.findings if x.rule == rule), None)
            if "eager" in fix:  # a route that measured slower: the finding must not promise it
                said = f is None or ("a loss" in f.message and "torch.compile" in f.fix.snippet)
                cells += ["no gain" if said else "PROMISED", "     -"]
                tops.append(a.results.findings[0].rule if a.results.findings else "-")
                continue
            est = f.estimate.speedup if f is not None else None
            cells += [f"{est:8.2f}x" if est else "     none", f"{est / meas:6.2f}" if est else "     -"]
            tops.append(a.results.findings[0].rule if a.results.findings else "-")
        print(f"{case:20} {fix:26} {rule:16} {meas:8.2f}x {cells[0]:>9} {cells[1]} {cells[2]:>10} {cells[3]}"
              f"  {tops[0]} / {tops[1]}")


if __name__ == "__main__":
    main()
