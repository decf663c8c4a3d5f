"""Rule x healthy-trace matrix: every rule on every fixed capture and healthy real trace.

A healthy step must come out clean: a finding above the reporting threshold on any of these
traces is a false finding. The set:

* ``fixtures/scenarios/<rule>/good/``: each scenario's fixed variant, both formats (the other
  rules' anti-patterns are absent by construction: every scenario plants exactly one);
* ``fixtures/cuda-graphs/``: a step already replayed as a CUDA graph;
* real traces from ``../shared/traces`` that their source describes as the optimised variant:
  nsys-ai's ``mfu_2gpu_after`` (after its MFU fix, 2x H100) and the resnet50 ``num_workers=4``
  capture (the data-loader fix of its ``num_workers=0`` sibling).

    python benchmarks/rule_matrix.py           # prints the matrix; exit 1 on any finding
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
HEALTHY_REAL = (
    "nsys-ai/mfu_2gpu_after.sqlite",
    "kineto/tb_plugin_samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
)


def healthy_traces() -> list[Path]:
    out = []
    for good in sorted((ROOT / "fixtures" / "scenarios").glob("*/good")):
        out += sorted(p for p in good.iterdir() if p.name.endswith((".sqlite.gz", "trace.json.gz")))
    out += sorted((ROOT / "fixtures" / "cuda-graphs").glob("*.sqlite.gz"))
    out += [SHARED / rel for rel in HEALTHY_REAL if (SHARED / rel).exists()]
    return out


def label(path: Path) -> str:
    for base in (ROOT / "fixtures", SHARED):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def matrix(paths: list[Path]) -> dict[str, dict[str, float]]:
    """trace -> rule -> speedup, for every finding and every below-threshold match."""
    from advisor.analysis import analyze

    out: dict[str, dict[str, float]] = {}
    for p in paths:
        r = analyze(p).results
        row = {f"{f.rule}": f.estimate.speedup for f in r.findings}
        row |= {f"({f.rule})": f.estimate.speedup for f in r.below_threshold}
        out[label(p)] = row
    return out


def main() -> int:
    from advisor.engine.registry import load_rules

    rules = [r.name for r in load_rules()]
    m = matrix(healthy_traces())
    width = max(len(k) for k in m)
    print(f"{'trace':{width}} " + " ".join(f"{r[:10]:>10}" for r in rules))
    bad = 0
    for trace, row in m.items():
        cells = []
        for r in rules:
            if r in row:
                cells.append(f"{row[r]:9.2f}x")
                bad += 1
            elif f"({r})" in row:
                cells.append(f"({row[f'({r})']:.3f})")
            else:
                cells.append(".")
        print(f"{trace:{width}} " + " ".join(f"{c:>10}" for c in cells))
    print(f"\n{len(m)} traces x {len(rules)} rules: {bad} findings above the threshold "
          "(parenthesised: matched but below it)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
