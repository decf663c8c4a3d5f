"""The gate on our H100 rule scenarios (pylint's bad/good idea, across two runs).

For every rule whose scenario has both variants in ``fixtures/scenarios/<rule>/{good,bad}/``:
the fixed -> bad pair fails naming the rule, the bad -> fixed pair passes, and a capture gated
against itself passes; a second capture of the same code (``*_repeat.*``), where one exists,
passes too. The nsys export and the torch.profiler trace of a variant are two profilers, never a
pair. The CLI runs on saved JSON results written from the same analyses, so both input paths are
covered without analysing a trace twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from advisor.errors import ExitCode
from advisor.gate.compare import DEFAULT_THRESHOLD, compare

from .conftest import SCENARIOS, run_cli

CAPTURES = ("nsys.sqlite.gz", "trace.json.gz")
DATA = Path(__file__).parent / "data"
CUDA_GRAPHS = SCENARIOS.parent / "cuda-graphs"


def _pairs() -> list[tuple[str, str]]:
    out = []
    for rule_dir in sorted(SCENARIOS.glob("*/")) if SCENARIOS.exists() else []:
        for capture in CAPTURES:
            if all((rule_dir / v / capture).exists() for v in ("good", "bad")):
                out.append((rule_dir.name, capture))
    return out


def _singles() -> list[Path]:
    return sorted(p for c in CAPTURES for p in SCENARIOS.glob(f"*/*/{c}")) \
        if SCENARIOS.exists() else []


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sources() -> dict:
    path = DATA / "SOURCES.json"
    return json.loads(path.read_text()) if path.exists() else {"repeats": {}, "changed_model": {}}


def _repeats() -> list[tuple[Path, Path, str]]:
    """(fixture, second capture of the same code, fixture sha256 it was paired with): our
    ``tests/gate/data/repeats`` (see SOURCES.json), ``*_repeat.*`` files beside a fixture, and
    one training script captured twice with CUDA graphs traced per graph and per node."""
    out = []
    for key, src in _sources()["repeats"].items():
        out.append((SCENARIOS / key / "nsys.sqlite.gz", DATA / "repeats" / key / "nsys.sqlite.gz",
                    src["fixture_sha256"]))
    for c in CAPTURES:
        stem, _, ext = c.partition(".")
        for repeat in sorted(SCENARIOS.glob(f"*/*/{stem}_repeat.{ext}")) if SCENARIOS.exists() \
                else []:
            if (repeat.parent / c).exists():
                out.append((repeat.parent / c, repeat, ""))
    graphs = [CUDA_GRAPHS / "train_graphtrace.sqlite.gz", CUDA_GRAPHS / "train_nodetrace.sqlite.gz"]
    if all(p.exists() for p in graphs):
        out.append((graphs[0], graphs[1], ""))
    return out


def _check_still_paired(fixture: Path, sha256: str) -> None:
    """A repeat pairs with the fixture it was captured beside, and only with that one: a
    re-captured fixture makes the pair stale, which is a bug to fix (re-capture the repeat with
    tests/gate/data/capture_repeats.py and update SOURCES.json), not a reason to stop testing."""
    assert fixture.exists(), f"{fixture} is missing"
    assert not sha256 or _sha256(fixture) == sha256, (
        f"{fixture} was re-captured since its repeat was made: re-run "
        "tests/gate/data/capture_repeats.py and update SOURCES.json")


PAIRS = _pairs()
no_scenarios = pytest.mark.skipif(not PAIRS, reason="no scenario captures in fixtures/scenarios")


COMPILED_FIX = {"compiler-fusion"}
"""Scenarios whose fix is torch.compile: every kernel of the fixed step is a different (Inductor)
kernel, so the gate's workload check refuses to compare the two runs; it must say so."""


def _refused_as_other_workload(base, cand) -> None:
    from advisor.errors import AnalysisError

    with pytest.raises(AnalysisError, match="different workloads"):
        compare(base, cand)


def _hidden_workload(base, cand) -> bool:
    """A run whose step is CUDA graph replays traced as single rows (nsys's default), with no
    host operators on both sides: nothing shows the two runs are one workload, and the gate
    cannot decide (exit 2, issue #30); it used to skip the check and pass unrelated runs."""
    from advisor.gate.workload import HIDDEN, kernel_similarity

    similarity, how = kernel_similarity(base, cand)
    return similarity is None and HIDDEN in how and not (base.ops and cand.ops)


def _refused_as_hidden(base, cand) -> None:
    from advisor.errors import AnalysisError

    with pytest.raises(AnalysisError, match="CUDA graphs traced as single rows"):
        compare(base, cand)


def _id(pair: tuple[str, str]) -> str:
    return f"{pair[0]}-{pair[1].split('.')[0]}"


@no_scenarios
@pytest.mark.parametrize("pair", PAIRS, ids=[_id(p) for p in PAIRS])
def test_introducing_the_anti_pattern_fails_naming_the_rule(pair, gate_input, saved_result):
    rule, capture = pair
    good, bad = (SCENARIOS / rule / v / capture for v in ("good", "bad"))
    if rule in COMPILED_FIX:
        _refused_as_other_workload(gate_input(good), gate_input(bad))
        return
    if _hidden_workload(gate_input(good), gate_input(bad)):
        _refused_as_hidden(gate_input(good), gate_input(bad))
        cli = run_cli(["gate", str(saved_result(good)), str(saved_result(bad))])
        assert cli.exit_code == 2 and "CUDA graphs" in cli.stderr, cli.stderr
        return
    result = compare(gate_input(good), gate_input(bad))
    assert result.exit_code == ExitCode.GATE_FAILED, [r.summary for r in result.regressions]
    assert rule in {r for reg in result.failures for r in reg.rules}
    cli = run_cli(["gate", str(saved_result(good)), str(saved_result(bad))])
    assert cli.exit_code == 1, cli.stderr
    assert rule in cli.stdout


def _fix_is_slower(rule: str) -> bool:
    """The scenario's fix measured slower than its bad variant without any profiler attached
    (``measured.json``: CUDA events over 50 steps) by more than the gate's threshold."""
    measured = json.loads((SCENARIOS / "measured.json").read_text())["rules"].get(rule)
    return bool(measured) and measured["speedup_median"] < 1 / (1 + DEFAULT_THRESHOLD)


@no_scenarios
@pytest.mark.parametrize("pair", PAIRS, ids=[_id(p) for p in PAIRS])
def test_fixing_the_anti_pattern_passes(pair, gate_input, saved_result):
    """bad -> fixed passes; two exceptions follow from measurements, not from the gate:
    a fix that is slower without a profiler fails on step time, and a torch.profiler capture
    whose only change is host time says it cannot tell (exit 2, with the reason)."""
    rule, capture = pair
    good, bad = (SCENARIOS / rule / v / capture for v in ("good", "bad"))
    if rule in COMPILED_FIX:
        _refused_as_other_workload(gate_input(bad), gate_input(good))
        return
    if _hidden_workload(gate_input(bad), gate_input(good)):
        _refused_as_hidden(gate_input(bad), gate_input(good))
        return
    result = compare(gate_input(bad), gate_input(good))
    why = [r.summary for r in result.regressions] + list(result.inconclusive)
    assert not any(r.kind != "step-time" for r in result.failures), why
    if _fix_is_slower(rule):
        assert result.exit_code == ExitCode.GATE_FAILED, why
        assert [r.kind for r in result.failures] == ["step-time"]
        return
    if result.exit_code == ExitCode.BAD_INPUT and capture == "trace.json.gz":
        assert "torch.profiler" in " ".join(result.inconclusive), why
        return
    assert result.exit_code == ExitCode.OK, why
    assert any(f.rule == rule and f.status in ("fixed", "better") for f in result.findings) or \
        result.timing.verdict == "faster"
    cli = run_cli(["gate", str(saved_result(bad)), str(saved_result(good))])
    assert cli.exit_code == 0, cli.stdout + cli.stderr


SINGLES = _singles()


@pytest.mark.skipif(not SINGLES, reason="no scenario captures in fixtures/scenarios")
@pytest.mark.parametrize("trace", SINGLES, ids=["-".join(p.parts[-3:-1]) + "-" +
                                                 p.name.split(".")[0] for p in SINGLES])
def test_a_capture_against_itself_passes(trace, gate_input):
    if _hidden_workload(gate_input(trace), gate_input(trace)):
        _refused_as_hidden(gate_input(trace), gate_input(trace))
        return
    result = compare(gate_input(trace), gate_input(trace))
    assert result.exit_code == ExitCode.OK, list(result.inconclusive)
    assert not result.regressions


REPEATS = _repeats()


@pytest.mark.skipif(not REPEATS, reason="no second capture of identical code")
@pytest.mark.parametrize("pair", REPEATS, ids=["-".join(p[1].parts[-3:-1]) for p in REPEATS])
def test_two_captures_of_identical_code_pass(pair, gate_input):
    """Real run-to-run variation on one H100: up to +30% on a launch-bound step whose host
    was slower (host timing noise), +5% on pageable copies (host memory bandwidth)."""
    first, second, sha256 = pair
    _check_still_paired(first, sha256)
    for a, b in ((first, second), (second, first)):
        if _hidden_workload(gate_input(a), gate_input(b)):
            _refused_as_hidden(gate_input(a), gate_input(b))
            continue
        result = compare(gate_input(a), gate_input(b))
        assert result.exit_code == ExitCode.OK, [r.summary for r in result.regressions] + list(
            result.inconclusive)


CHANGED = [(DATA / src["baseline"], DATA / src["file"], src["baseline_sha256"], src["sha256"])
           for src in _sources()["changed_model"].values()]


@pytest.mark.parametrize("pair", CHANGED, ids=[p[1].name.split(".")[0] for p in CHANGED])
def test_the_same_harness_with_another_model_is_a_different_workload(pair, saved_result):
    """Both captures are kept in tests/gate/data with their sha256 (the scenario fixture they
    were first paired with has since been re-captured); their _timing.json record the models."""
    before, changed, before_sha, changed_sha = pair
    assert (_sha256(before), _sha256(changed)) == (before_sha, changed_sha)
    models = [json.loads(p.with_name(p.name.replace(".sqlite.gz", "_timing.json")).read_text())
              ["scenario_info"] for p in (before, changed)]
    assert (models[0]["d"], models[0]["depth"]) != (models[1]["d"], models[1]["depth"])
    cli = run_cli(["gate", str(saved_result(before)), str(saved_result(changed))])
    assert cli.exit_code == 2 and "different workloads" in cli.stderr, cli.stdout + cli.stderr
