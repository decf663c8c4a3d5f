"""The gain on public training scripts: each fix applied with the script's own knob (compile,
autocast, FP8) measured on the H100 without a profiler, against the estimate from the traced
variant, as a share of the step saved (issue 35).

The figures are fixtures/public/measured.json's; the rows are tests/validation_data.PUBLIC_ROWS,
which `python benchmarks/validate_public.py` prints. The bound is the rule's (compiler-fusion
holds itself to 20%, see its ``GAIN_TOLERANCE``), else 30%. A route measured slower than the
step as traced ("float8, eager") is tested in tests/test_fusion_and_precision.py: no gain may be
promised there, which is not a gain comparison.
"""

from __future__ import annotations

from functools import cache

import pytest

from advisor.analysis import Analysis, analyze
from tests import validation_data as vd

FILES = {"nsys": "nsys.sqlite.gz", "kineto": "trace.json.gz"}
CASES = [(case, rule, before, after, fmt) for case, fix, rule, before, after in vd.PUBLIC_ROWS
         if "eager" not in fix for fmt in FILES]

MISSES = {
    ("planted-gpt-routes", "compiler-fusion"): "+56% (14.7% of the step promised, 9.4% measured) on "
    "the wide GPT (d 2560, 8 layers), while GPT-2 size, nanoGPT and timm are within 18%: why the "
    "chain model over-promises at this width is not established",
    ("nanogpt", "compiler-fusion", "kineto"): "-24% (17.6% of the step promised, 23.1% measured) on "
    "the torch.profiler capture since the settled replays and the mean baseline of wave 3 (was "
    "within 18%; the nsys capture still is): the replay of the fused step starts from empty queues "
    "and stays host-bound on the tracer's per-op cost; not yet re-derived",
}


@cache
def _analysis(case: str, fmt: str) -> Analysis:
    return analyze(vd.PUBLIC / case / FILES[fmt])


@pytest.mark.parametrize(("case", "rule", "before", "after", "fmt"), CASES)
def test_public_script_gain_is_within_the_rules_bound(case, rule, before, after, fmt, request):
    miss = MISSES.get((case, rule, fmt)) or MISSES.get((case, rule))
    if miss:
        request.applymarker(pytest.mark.xfail(reason=miss, strict=True))
    measured = vd.public_speedup(case, before, after)
    found = next((f for f in _analysis(case, fmt).results.findings if f.rule == rule), None)
    assert found is not None, f"{case}/{fmt}: {rule} not raised"
    est = found.estimate.speedup
    error = (vd.saving(est) - vd.saving(measured)) / vd.saving(measured)
    assert abs(error) <= vd.gain_bound(rule), (
        f"{case}/{fmt} {rule}: estimated saving {vd.saving(est):.1%} vs measured "
        f"{vd.saving(measured):.1%} ({error:+.0%})")
