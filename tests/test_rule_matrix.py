"""No false findings on healthy steps: every rule on every fixed capture and healthy real trace.

There is no allowlist (issue 35): a finding on a healthy trace is either a measured true finding
or a false one. The unmeasured ones are listed in tests/healthy_findings.py (``UNMEASURED``) and
run here as strict xfails: the count is visible in the summary, an entry the rule stops raising
fails until it is removed, and any finding not listed fails. The measured ones (``MEASURED``: the
fix applied to that step and timed without a profiler) must be raised, and their estimate's gain
is held to the rule's bound like any other (a strict xfail where it is known to be outside).
`python benchmarks/rule_matrix.py` prints the whole matrix.
"""

from __future__ import annotations

from functools import cache

import pytest

from advisor.analysis import Analysis, analyze
from advisor.engine.runner import MIN_SPEEDUP
from tests import validation_data as vd
from tests.healthy_findings import ARCHIVE, IN_PROCESS_CALLS, MEASURED, MISSED, RUN_KINDS, UNMEASURED, Timed

TRACES = vd.healthy_traces()
BY_LABEL = {vd.label(p): p for p in TRACES}
LISTED = sorted(k for k in UNMEASURED if k[0] in BY_LABEL)
TIMED = sorted(MEASURED)
ALL_TIMED = {**MEASURED, **MISSED}
TRUE = [k for k in TIMED if not MEASURED[k].false]
FALSE = [k for k in TIMED if MEASURED[k].false]


@cache
def _analysis(label: str) -> Analysis:
    return analyze(BY_LABEL[label])


def test_the_set_covers_every_scenario_fix_and_a_real_trace():
    labels = list(BY_LABEL)
    for s in sorted(p.name for p in vd.SCENARIOS.iterdir() if p.is_dir()):
        assert any(lbl.startswith(f"scenarios/{s}/good") for lbl in labels), s
    assert any(lbl.startswith("nsys-ai/") for lbl in labels)


def test_every_listed_finding_names_a_healthy_trace():
    """An entry for a trace that is not in the set would be an allowlist entry nobody checks."""
    missing = [k for k in [*UNMEASURED, *MEASURED, *MISSED] if k[0] not in BY_LABEL]
    assert not missing
    assert not set(UNMEASURED) & set(MEASURED) and not set(MISSED) & {*UNMEASURED, *MEASURED}


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize("label", list(BY_LABEL))
def test_no_unlisted_finding_on_a_healthy_step(label: str):
    new = [f"{f.rule} {f.estimate.speedup:.2f}x: {f.message}" for f in _analysis(label).results.findings
           if (label, f.rule) not in UNMEASURED and (label, f.rule) not in MEASURED]
    assert not new, (label, new)


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize(("label", "rule"), LISTED, ids=[f"{t}-{r}" for t, r in LISTED])
def test_an_unmeasured_finding_is_not_raised_on_a_healthy_step(label: str, rule: str, request):
    request.applymarker(pytest.mark.xfail(reason=UNMEASURED[(label, rule)], strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert not raised, f"{label}: {rule} {raised[0].estimate.speedup:.2f}x, never measured"


def test_the_docs_table_lists_every_unmeasured_finding():
    """docs/validation.md's table (`benchmarks/rule_matrix.py --markdown`) names each entry."""
    docs = (vd.ROOT / "docs" / "validation.md").read_text()
    missing = [k for k in [*UNMEASURED, *MEASURED, *MISSED] if f"| `{k[0]}` | {k[1]} |" not in docs]
    assert not missing


@pytest.mark.parametrize(("label", "rule"), sorted(ALL_TIMED),
                         ids=[f"{t}-{r}" for t, r in sorted(ALL_TIMED)])
def test_a_measured_finding_rests_on_enough_runs_of_one_machine(label: str, rule: str):
    """Each variant in at least MIN_RUNS processes, each run the variant and fix its kind names,
    all on the GPU the entry names (a ratio never mixes two machines)."""
    t = ALL_TIMED[(label, rule)]
    base, fixed = t.runs(t.base), t.runs(t.fix)
    assert len(base) >= vd.MIN_RUNS and len(fixed) >= vd.MIN_RUNS, (len(base), len(fixed))
    if t.paired:  # blocks of one process: pairs enough for the median's interval to mean much
        assert len(base) == len(fixed) >= 30, (len(base), len(fixed))
    for kind, runs in ((t.base, base), (t.fix, fixed)):
        assert {(r["variant"], r.get("fix")) for r in runs} == {RUN_KINDS[kind]}, kind
    gpus = {r["env"]["gpu"] for r in base + fixed}
    assert len(gpus) == 1 and t.machine in gpus.pop()


PAIRED = sorted(k for k, t in ALL_TIMED.items() if t.paired)


@pytest.mark.parametrize(("label", "rule"), PAIRED, ids=[f"{t}-{r}" for t, r in PAIRED])
def test_an_in_process_verdict_reads_the_largest_call_and_no_call_contradicts_it(label, rule):
    """Wave 11's rule: the call with the most block pairs gives the verdict, and every other call
    that timed the step with the same fix has an interval overlapping its own (else the step is
    unsettled)."""
    t = ALL_TIMED[(label, rule)]
    assert t.folder in IN_PROCESS_CALLS[t.fix]
    others = [Timed(f, t.stem, t.fix, t.machine, base=t.base, paired=True) for f in IN_PROCESS_CALLS[t.fix]
              if f != t.folder and (ARCHIVE / f / f"{t.stem}-ab.json").exists()]
    assert all(len(o.runs(o.base)) < len(t.runs(t.base)) for o in others)
    low, high = t.spread()
    for o in others:
        o_low, o_high = o.spread()
        assert o_low <= high and low <= o_high, (o.folder, (o_low, o_high), (low, high))


@pytest.mark.parametrize(("label", "rule"), sorted(ALL_TIMED),
                         ids=[f"{t}-{r}" for t, r in sorted(ALL_TIMED)])
def test_a_measured_verdict_is_the_one_its_runs_give(label: str, rule: str):
    """True: every pair of a base run and a fixed run gains at least the threshold a finding
    needs (MIN_SPEEDUP); false: no pair does. Runs that straddle it settle nothing and stay in
    UNMEASURED (``_timed_note``)."""
    t = ALL_TIMED[(label, rule)]
    low, high = t.spread()
    if t.false:
        assert high < MIN_SPEEDUP, (low, high)
    else:
        assert low >= MIN_SPEEDUP, (low, high)


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize(("label", "rule"), FALSE, ids=[f"{t}-{r}" for t, r in FALSE])
def test_a_measured_false_finding_is_not_raised(label: str, rule: str, request):
    if MEASURED[(label, rule)].raised:
        request.applymarker(pytest.mark.xfail(reason=MEASURED[(label, rule)].false, strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert not raised, f"{label}: {rule} {raised[0].estimate.speedup:.2f}x, measured " \
                       f"{MEASURED[(label, rule)].speedup():.3f}x"


@pytest.mark.grouped_by("label")
@pytest.mark.parametrize(("label", "rule"), TRUE, ids=[f"{t}-{r}" for t, r in TRUE])
def test_a_measured_finding_is_raised_and_its_gain_is_within_the_bound(label: str, rule: str,
                                                                      request):
    t = MEASURED[(label, rule)]
    if t.miss:
        request.applymarker(pytest.mark.xfail(reason=t.miss, strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert raised, f"{label}: {rule} no longer raised, while its fix measured {t.speedup():.3f}x"
    est, meas = raised[0].estimate.speedup, t.speedup()
    err = (vd.saving(est) - vd.saving(meas)) / vd.saving(meas)
    assert abs(err) <= vd.gain_bound(rule), f"{label}: {est:.3f}x against {meas:.3f}x ({err:+.0%})"


@pytest.mark.parametrize(("label", "rule"), sorted(MISSED), ids=[f"{t}-{r}" for t, r in sorted(MISSED)])
def test_a_measured_true_finding_is_raised_where_the_rule_misses_it(label: str, rule: str, request):
    t = MISSED[(label, rule)]
    request.applymarker(pytest.mark.xfail(reason=t.miss, strict=True))
    raised = [f for f in _analysis(label).results.findings if f.rule == rule]
    assert raised, f"{label}: {rule} not raised, while its fix measured {t.speedup():.3f}x"
