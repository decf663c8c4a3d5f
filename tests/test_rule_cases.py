"""Every rule on its real H100 scenario: the bad trace raises it first, the fixed trace does not,
and the estimate lands within a factor 1.3 of the speedup measured without a profiler and within
30% (or the rule's stated ``GAIN_TOLERANCE``) of the measured gain, the share of the step saved.

The traces and timings come from benchmarks/scenarios (captured on an H100; see
fixtures/README.md). A rule without a scenario fails here: rules are validated on real
traces or not shipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.engine.registry import load_rules
from advisor.engine.runner import MIN_SPEEDUP
from tests import validation_data as vd
from tests.conftest import SCENARIOS

RULES = [r.name for r in load_rules()]
FORMATS = ("nsys", "kineto")
_FILE = {"nsys": "nsys.sqlite.gz", "kineto": "trace.json.gz"}
CAPTURED = [(r, f) for r in RULES for f in FORMATS if (SCENARIOS / r / "bad" / _FILE[f]).exists()]
"""(rule, format) pairs whose bad variant was captured in that format (filtered, not skipped)."""
FIXED_CAPTURED = [(r, f) for r, f in CAPTURED if (SCENARIOS / r / "good" / _FILE[f]).exists()]

# Measured misses, kept visible (strict: they fail the suite once the model gets them right).
OUT_OF_TOLERANCE = {
    ("cpu-bound-loss", "nsys"): "a sync-heavy per-sample loop runs 2x slower under nsys (41.6 vs "
    "20.8 ms); the profiler-overhead model (11 us per call) removes only part of it: the fixed "
    "step is predicted right (10.8 vs 10.3 ms measured) but the baseline stays inflated",
    ("cpu-bound-loss", "kineto"): "same under torch.profiler (53.9 vs 20.8 ms per step)",
    ("unfused-attention", "nsys"): "0.72x of measured (3.76x for 5.26x): the layout copies "
    "around the unfused attention (3.4 ms per step of transposes) are not modeled as removed, "
    "and the settled replay of the fix is host-bound on the unfused program's operators",
    ("unfused-attention", "kineto"): "0.52x of measured (2.71x for 5.26x): the settled replay "
    "of the fix is host-bound on the unfused program's host work (9.1 ms per step under "
    "torch.profiler against 3.7 ms in the fixed program: ~280 more operators per step), of "
    "which only the work between the two matmuls is removed; the 4.40x it passed with was "
    "the median of a replay that had not settled (issue #35)",
}


# The disjoint check set (fixtures/scenarios-check: the same scenarios at other shapes, nothing
# fitted on them). Its misses are the model's honest error, kept visible as strict xfails.
CHECK = vd.SETS["check"]
CHECK_CASES = [(r.name, fmt) for r in sorted(CHECK.iterdir()) if r.is_dir() for fmt in FORMATS
               if (r / "bad" / _FILE[fmt]).exists()]
NO_GAIN = {r for r, _ in CHECK_CASES if vd.measured_speedup(CHECK / r) < MIN_SPEEDUP}
"""Check scenarios whose fix measured no gain worth reporting at the check shape: there the rule
must stay silent (a finding is reported from MIN_SPEEDUP on), not rank first."""
UNRESOLVED = {r for r, _ in CHECK_CASES if (runs := vd.repeat_runs(CHECK / r)) is not None
              and min(b / g for b, g in zip(runs["bad"], runs["good"], strict=False)) < 1.0}
"""Check scenarios whose fix measured slower than the bad variant in one of its process runs:
the gain is inside the host's run-to-run noise (unfused-gemm-gelu at the check shape: 0.89x,
1.04x, 1.28x), so neither an estimate nor silence can be judged against it; only the fixed
variant's silence is checked."""
CHECK_OUT_OF_TOLERANCE = {
    ("unfused-attention", "kineto"): "0.57x of measured (1.98x for 3.49x, 3 runs 3.47-3.49) at "
    "S=1024, 12 heads: the settled replay of the fix is host-bound on the unfused program's host "
    "work (torch.profiler's per-operator cost included), and the layout copies are not modelled "
    "as removed",
    ("unfused-attention", "nsys"): "0.63x of measured (2.20x for 3.49x): same cause; the single "
    "process run it was first checked on measured 2.71x, the three runs of wave 5 3.47-3.49x",
    ("uncaptured-cuda-graph", "kineto"): "1.86x of measured (4.03x for 2.16x, 3 runs 1.89-2.44): "
    "torch.profiler's per-op host cost on this narrower, shallower MLP is above the 2.5 us fitted "
    "on the fit set, so the eager host time the graph removes looks larger than it is",
    ("uncaptured-cuda-graph", "nsys"): "1.34x of measured (2.90x for 2.16x): the bad variant's "
    "eager step itself spreads 24.8% over the three runs (4.25-5.46 ms), the launch-bound step "
    "the graph fixes; against its slowest run the estimate is within 1.1x",
}


class Rows:
    """Scenario rows, each validated (its bad and good traces analysed) when a test first asks
    for it: a worker analyses only the scenarios its tests check, and the tests of one scenario
    run side by side (``grouped_by``), so each is analysed about once per run, not once per
    xdist worker."""

    def __init__(self, base: Path, tmp: Path) -> None:
        self._base, self._tmp = base, tmp
        self._rows: dict[tuple[str, str], vd.Row] = {}

    def __getitem__(self, key: tuple[str, str]) -> vd.Row:
        if key not in self._rows:
            rule, fmt = key
            row = vd.validate(self._base / rule, fmt, self._tmp)
            assert row is not None, f"{self._base.name} {rule}/{fmt}: capture missing"
            self._rows[key] = row
        return self._rows[key]


CHECK_GAIN_CASES = [(r, f) for r, f in CHECK_CASES if r not in NO_GAIN | UNRESOLVED]
"""The check cases with a measured gain to compare an estimate with."""
CHECK_FALSE_FINDINGS = {
    ("loader-jitter", "kineto"): "the fixed loader's torch.profiler capture still raises "
    "loader-jitter (its nsys capture does not)",
}


@pytest.fixture(scope="session")
def check_rows(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    return Rows(CHECK, Path(tmp_path_factory.mktemp("check")))


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CHECK_CASES)
def test_check_set_bad_raises_its_rule_first_and_good_stays_clean(check_rows, rule, fmt, request):
    if (rule, fmt) in CHECK_FALSE_FINDINGS:
        request.applymarker(pytest.mark.xfail(reason=CHECK_FALSE_FINDINGS[(rule, fmt)], strict=True))
    row = check_rows[(rule, fmt)]
    if rule in UNRESOLVED:
        pass  # the fix's gain is within the runs' noise: the bad variant's findings judge nothing
    elif vd.raised_but_unranked(row):
        assert "no shapes" in row.withheld, row.withheld
    elif rule in NO_GAIN:
        assert row.estimated is None or row.estimated < MIN_SPEEDUP, (
            f"{rule}/{fmt}: the fix measured {row.measured:.3f}x, the rule promises "
            f"{row.estimated:.3f}x")
    elif row.top_rule == ALSO_FIXED_BY.get(rule):
        assert any(f.startswith(f"{rule} ") for f in row.bad_findings[:2]), row.bad_findings
    else:
        assert row.top_rule == rule, row.bad_findings
    assert not row.good_raises


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CHECK_GAIN_CASES)
def test_check_set_estimate_is_within_tolerance(check_rows, rule, fmt, request):
    if (rule, fmt) in CHECK_OUT_OF_TOLERANCE:
        request.applymarker(pytest.mark.xfail(reason=CHECK_OUT_OF_TOLERANCE[(rule, fmt)], strict=True))
    row = check_rows[(rule, fmt)]
    ratio = row.estimated / row.measured
    assert 1 / vd.TOLERANCE <= ratio <= vd.TOLERANCE, (
        f"{rule}/{fmt}: estimated {row.estimated:.3f}x vs measured {row.measured:.3f}x")


ALSO_FIXED_BY = {
    "rng-bound-dropout": "compiler-fusion",
}
"""Rules whose fix another rule's fix performs too: torch.compile generates the fused in-kernel
Philox dropout that rng-bound-dropout's fix writes by hand (and fuses the ReLU/add chains around
it), so on that scenario compiler-fusion may rank first (1.099x against 1.092x); the rule must
still be raised, second, and its own estimate is checked below."""


@pytest.fixture(scope="session")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    return Rows(SCENARIOS, Path(tmp_path_factory.mktemp("scenarios")))


@pytest.mark.parametrize("rule", RULES)
def test_rule_has_a_real_h100_scenario(rule: str):
    d = SCENARIOS / rule
    for variant in ("bad", "good"):
        assert (d / variant / "timing.json").exists(), f"{rule}: no measured {variant} variant"
        assert (d / variant / "nsys.sqlite.gz").exists() or (d / variant / "trace.json.gz").exists()


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CAPTURED)
def test_bad_trace_raises_the_rule_first(rows, rule: str, fmt: str):
    row = rows[(rule, fmt)]
    if vd.raised_but_unranked(row):
        assert "no shapes" in row.withheld, row.withheld
        return
    if row.top_rule == ALSO_FIXED_BY.get(rule):
        assert any(f.startswith(f"{rule} ") for f in row.bad_findings[:2]), row.bad_findings
        return
    assert row.top_rule == rule, f"{rule}/{fmt}: findings {row.bad_findings}"


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), FIXED_CAPTURED)
def test_fixed_trace_does_not_raise_the_rule(rows, rule: str, fmt: str):
    assert rows[(rule, fmt)].good_raises is False


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CAPTURED)
def test_estimate_is_within_tolerance_of_the_measured_speedup(rows, rule: str, fmt: str, request):
    if (rule, fmt) in OUT_OF_TOLERANCE:
        request.applymarker(pytest.mark.xfail(reason=OUT_OF_TOLERANCE[(rule, fmt)], strict=True))
    row = rows[(rule, fmt)]
    assert row.estimated is not None, f"{rule}/{fmt}: not raised ({row.bad_findings})"
    ratio = row.estimated / row.measured
    assert 1 / vd.TOLERANCE <= ratio <= vd.TOLERANCE, (
        f"{rule}/{fmt}: estimated {row.estimated:.3f}x vs measured {row.measured:.3f}x")


# The gain, the share of the step the fix saves, estimated against measured (issue 35): within 30%
# or the rule's stated GAIN_TOLERANCE. A factor on the speedup lets a small gain be off by 8x;
# this does not. Misses kept visible as strict xfails, fit and check sets apart.
GAIN_MISSES = {
    ("cpu-bound-loss", "kineto"): "+34% (72% of the step promised, 54% measured): torch.profiler "
    "slows the sync-heavy per-sample loop 2.6x and the overhead model removes only part of it "
    "(see OUT_OF_TOLERANCE)",
    ("loader-jitter", "nsys"): "+43% (41% of the step promised, 29% measured): the replay takes "
    "the whole input wait off, and the fixed run gets less than that back (where the rest goes is "
    "not isolated)",
    ("loader-jitter", "kineto"): "+33% (38% promised, 29% measured): same",
}
CHECK_GAIN_MISSES = {
    ("uncaptured-cuda-graph", "kineto"): "+40% (75% of the step promised, 54% measured): see "
    "CHECK_OUT_OF_TOLERANCE",
    ("unfused-attention", "kineto"): "-31% (49% promised, 71% measured): see "
    "CHECK_OUT_OF_TOLERANCE",
}


def _assert_gain(row: vd.Row) -> None:
    assert row.estimated is not None, f"{row.rule}/{row.fmt}: not raised ({row.bad_findings})"
    assert row.gain_ok, (
        f"{row.rule}/{row.fmt}: estimated saving {vd.saving(row.estimated):.1%} vs measured "
        f"{vd.saving(row.measured):.1%} ({row.gain_error:+.0%}; bound {vd.gain_bound(row.rule):.0%})")


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CAPTURED)
def test_estimated_gain_is_within_the_rules_bound_of_the_measured_gain(rows, rule, fmt, request):
    if (rule, fmt) in GAIN_MISSES:
        request.applymarker(pytest.mark.xfail(reason=GAIN_MISSES[(rule, fmt)], strict=True))
    _assert_gain(rows[(rule, fmt)])


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CHECK_GAIN_CASES)
def test_check_set_gain_is_within_the_rules_bound(check_rows, rule, fmt, request):
    if (rule, fmt) in CHECK_GAIN_MISSES:
        request.applymarker(pytest.mark.xfail(reason=CHECK_GAIN_MISSES[(rule, fmt)], strict=True))
    _assert_gain(check_rows[(rule, fmt)])


def test_a_rules_gain_bound_is_stated_and_not_looser_than_the_default():
    """A rule may hold itself to a tighter bound (compiler-fusion does: its modelling choices move
    the gain by less than 30%), never a looser one that would let a halved gain pass."""
    for cls in load_rules():
        bound = vd.gain_bound(cls.name)
        assert 0 < bound <= vd.GAIN_TOLERANCE, (cls.name, bound)


STABLE_WITH_MISSES = {
    "loader-jitter": "stable, but its gain misses on both formats of its fit capture (GAIN_MISSES)",
    "uncaptured-cuda-graph": "stable, but its check-set estimates are 1.34x (nsys) and 1.86x "
    "(torch.profiler) of the 3-run measurement (CHECK_OUT_OF_TOLERANCE)",
}
"""Rules marked stable whose validation misses somewhere (issue 35): whether to lower their status
or fix the model is the lead's call; until then the contradiction is a visible strict xfail."""


@pytest.mark.parametrize("rule", RULES)
def test_a_stable_rule_is_validated_on_both_trace_formats(rule: str, request):
    """Reads every list of misses (speedup and gain, fit and check sets): a stable rule has none."""
    from advisor.engine.rule import Status

    if rule in STABLE_WITH_MISSES:
        request.applymarker(pytest.mark.xfail(reason=STABLE_WITH_MISSES[rule], strict=True))
    cls = next(r for r in load_rules() if r.name == rule)
    if cls.status is Status.STABLE:
        tables = {"fit": OUT_OF_TOLERANCE, "check": CHECK_OUT_OF_TOLERANCE, "fit gain": GAIN_MISSES,
                  "check gain": CHECK_GAIN_MISSES}
        misses = [(name, fmt) for name, table in tables.items() for fmt in FORMATS if (rule, fmt) in table]
        assert not misses, f"{rule} is stable but its estimate misses on a real capture: {misses}"


DOCS = (vd.ROOT / "docs" / "validation.md").read_text()


@pytest.mark.grouped_by("rule", "fmt")
@pytest.mark.parametrize(("rule", "fmt"), CAPTURED)
def test_the_docs_table_shows_this_estimate_and_its_gain(rows, rule, fmt):
    """docs/validation.md's rules table is `benchmarks/validate_rules.py --markdown`'s: each fit-set
    row carries what the code estimates now, beside the speedup ratio (issue 35)."""
    line = next((x for x in DOCS.splitlines() if x.startswith(f"| fit | {rule} |")), None)
    assert line is not None, f"{rule}: no row in docs/validation.md"
    for cell in vd.markdown_cells(rows[(rule, fmt)]):
        assert f"| {cell} |" in line, (cell, line)
