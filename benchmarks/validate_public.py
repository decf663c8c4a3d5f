"""Estimates vs speedups measured on public training scripts and the planted GPT routes (H100).

    python benchmarks/validate_public.py

Reads fixtures/public/<case>/{nsys.sqlite.gz, trace.json.gz} and fixtures/public/measured.json
(captured by benchmarks/public/device_run.sh and device_run_hf.sh) and prints, per fix applied
with the framework's own knob, the measured speedup and advisor's estimate from each trace format.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "fixtures" / "public"
# (case, fix as applied, rule, variant traced, variant after the fix)
ROWS = [
    ("nanogpt", "--compile=True", "compiler-fusion", "eager", "compile"),
    ("timm-vit-b", "--torchcompile", "compiler-fusion", "bf16-eager", "bf16-compile"),
    ("lightning-vit-b", "precision=bf16-mixed", "fp32-matmul", "32-true", "bf16-mixed"),
    ("hf-gpt2", "--bf16", "fp32-matmul", "fp32", "bf16"),
    ("planted-gpt-routes", "torch.compile", "compiler-fusion", "wide-eager", "wide-compile"),
    ("planted-gpt-routes", "torchao float8 + compile", "fp8-candidate", "wide-eager", "wide-fp8-compile"),
    ("planted-gpt-routes", "torchao float8, eager", "fp8-candidate", "wide-eager", "wide-fp8"),
]


def main() -> None:
    measured = json.loads((PUBLIC / "measured.json").read_text())
    cache: dict[Path, object] = {}
    print(f"{'case':20} {'fix':26} {'rule':16} {'measured':>9} {'nsys est':>9} {'ratio':>6} "
          f"{'kineto est':>10} {'ratio':>6}  top finding (nsys / kineto)")
    for case, fix, rule, before, after in ROWS:
        ms = measured[case]["step_ms"]
        meas = ms[before] / ms[after]
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
