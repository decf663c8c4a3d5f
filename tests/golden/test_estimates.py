"""The what-if engine gives today's estimates on every real trace (issue #17's guard).

`estimates.json` was recorded by ``python tests/golden/estimates.py --write`` before the engine was
rewritten for speed; a faster engine must reproduce it. Every figure the report prints
(speedup, low and high to 2 decimals, predicted step in ms to 2 decimals) is compared far tighter
than printed: speedups to 1e-6 relative, step times to 1 ns.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.fixture_manifest import trace_keys
from tests.golden.conftest import analysis_of
from tests.golden.estimates import GOLDEN, ROOT, record

WANT = json.loads(GOLDEN.read_text(encoding="utf-8"))
PRESENT = sorted(k for k in WANT if (ROOT / k).exists())


def close(got, want, key: str) -> bool:
    if want is None or got is None:
        return got == want
    if key.endswith("_ns"):
        return abs(got - want) <= 1.0
    return math.isclose(got, want, rel_tol=1e-6)


def test_the_golden_covers_the_test_traces_and_nothing_else():
    """Exactly the manifest's traces (fixtures/manifest.toml): the evidence archive is not swept."""
    recorded = {k for k in WANT if k.startswith("fixtures/")}
    assert recorded == set(trace_keys()), "python tests/golden/estimates.py --write, after review"


@pytest.mark.grouped_by("trace_key")
@pytest.mark.parametrize("trace_key", PRESENT)
def test_estimates_match_the_recorded_golden(trace_key):
    key = trace_key
    got, want = record(key, analysis_of(key)), WANT[key]
    assert set(got) == set(want), key
    for field in ("steps", "error", "observed_periods", "unprofiled_periods"):
        assert got.get(field) == want.get(field), (key, field)
    for field in ("unprofiled_median_ns", "unprofiled_mean_ns", "profiler_overhead_ns"):
        assert close(got[field], want[field], field), (key, field, got[field], want[field])
    assert sorted(got["findings"]) == sorted(want["findings"]), key
    pairs = [(got["findings"][k], want["findings"][k]) for k in want["findings"]]
    if want["combined"] is not None or got["combined"] is not None:
        pairs.append((got["combined"], want["combined"]))
    for g, w in pairs:
        assert g is not None and w is not None, key
        for field, value in w.items():
            assert close(g[field], value, field), (key, field, g[field], value)
