"""The step's floors before and after one finding's fix: the GPU's busy time of the kernels that
stay, and the host's own time that stays (`advisor.engine.floors`), as the what-if replay sees them.

    python benchmarks/fix_floors.py TRACE RULE

Why: an estimate is the replayed step after the fix, held up by the higher of these floors. Two
captures of one script that disagree on an estimate show which side of the model differs (issue
33: HF run_clm.py GPT-2 FP32, fp32-matmul 3.20x from torch.profiler against 2.42x from nsys; their
GPU floors after the fix agree, 47.5 ms, their host floors do not, 37.0 against 75.0 ms).
A bare trace's analysis (no session state), as `advisor analyze` makes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("\n\n")[1].strip())
    from advisor.analysis import analyze
    from advisor.engine.context import RuleContext, analysed_steps

    trace, rule = sys.argv[1], sys.argv[2]
    a = analyze(trace)
    found = next((f for f in a.results.findings + a.results.below_threshold if f.rule == rule), None)
    if found is None:
        raise SystemExit(f"{trace}: {rule} not raised")
    ctx = RuleContext(a.graph, analysed_steps(a.graph))
    basis = found.estimate.basis
    ms = {k: v / 1e6 for k, v in ctx.floors((), basis).to_dict().items()}
    after = {k: v / 1e6 for k, v in ctx.floors(found.effects, basis).to_dict().items()}
    print(f"{trace}: {rule} {found.estimate.speedup:.2f}x, step {found.estimate.step_ns / 1e6:.1f} "
          f"-> {found.estimate.predicted_step_ns / 1e6:.1f} ms ({basis})")
    print(f"{'floor':<8} {'before':>9} {'after':>9}  (ms per step)")
    for k in ms:
        print(f"{k:<8} {ms[k]:>9.1f} {after.get(k, 0.0):>9.1f}")


if __name__ == "__main__":
    main()
