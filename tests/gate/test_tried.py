"""`advisor gate` reads `advisor profile --try` results like any other result (issue 36, item 5).

Real data only: the archived H100 `--try` results (fixtures/archive/public), and for the plain
runs' unprofiled steps the archived two-rank DDP trial's own rank results (wave5 ``ddp_try``:
plain 45.2 ms, ``compile`` 37.4 ms a step, 40 settled steps each), put into its own result by
the code paths `advisor profile --try` uses (`job_result`, `settled_steps_ms`, `Tried`'s JSON).
That result's profiled window kept 2 steady steps: no verdict on them, a verdict on the trials'.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from advisor.capture.trial import job_result, rank_results, settled_steps_ms
from advisor.gate.tried import MeasuredFix, read_tried
from advisor.report.tried import Tried, to_json

from .conftest import REPO, run_cli

ARCHIVE = REPO / "fixtures" / "archive" / "public"
NANOGPT = ARCHIVE / "nanogpt" / "wave3-2026-11-25" / "profile_try.result.json.xz"
DDP = ARCHIVE / "wave5-2026-11-26" / "ddp_try"


def _load(path: Path) -> dict[str, Any]:
    return json.loads(lzma.decompress(path.read_bytes()))


def _write(tmp: Path, name: str, data: dict[str, Any]) -> Path:
    out = tmp / name
    out.write_text(json.dumps(data))
    return out


def _trial_steps(tag: str) -> tuple[float, ...]:
    """One archived two-rank trial's settled steps, as `advisor profile --try` keeps them: the
    job's step is the slowest rank's (`job_result`)."""
    job = job_result(rank_results(DDP / f"{tag}.result.json"), 0, DDP / "try.log")
    assert job["status"] == "ok", job
    return settled_steps_ms(job)


def _ddp_with(tmp: Path, name: str, tag: str) -> Path:
    """The archived DDP `--try` result, its plain runs' steps those of trial ``tag``: as if
    the job had run that way (``03-compile``: the PR turned torch.compile on)."""
    data = _load(DDP / "try.json.xz")
    steps = _trial_steps(tag)
    data["tried"]["plain_steps_ms"] = to_json(Tried(
        runs=1, steps=15, seconds=60.0, statistic="", plain_ms=(), fixes=(),
        plain_steps_ms=(steps,)))["plain_steps_ms"]
    return _write(tmp, name, data)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ddp-try")
    return {"plain": _ddp_with(tmp, "plain.json", "02-plain"),
            "compiled": _ddp_with(tmp, "compiled.json", "03-compile")}


@pytest.fixture(scope="module")
def nanogpt(tmp_path_factory) -> dict[str, Path]:
    """nanoGPT's archived `--try` result (written before ``plain_steps_ms``), and the same
    result without its ``tried`` section: a plain `advisor profile` result."""
    tmp = tmp_path_factory.mktemp("nanogpt-try")
    data = _load(NANOGPT)
    plain = {k: v for k, v in data.items() if k != "tried"}
    return {"try": _write(tmp, "try.json", data), "plain": _write(tmp, "plain.json", plain)}


def test_the_trial_steps_are_the_runs_own():
    """The steps taken are the ones each trial's mean was computed over (within rounding)."""
    for tag in ("02-plain", "03-compile"):
        job = job_result(rank_results(DDP / f"{tag}.result.json"), 0, DDP / "try.log")
        steps = settled_steps_ms(job)
        assert len(steps) == job["steps_timed"]
        assert sum(steps) / len(steps) == pytest.approx(job["mean_ns"] / 1e6, rel=0.01)
    # a trial result that keeps them (`advisor.capture.trial_child` now writes settled_ms)
    assert settled_steps_ms({"status": "ok", "settled_ms": [1.5, 2.0]}) == (1.5, 2.0)
    assert settled_steps_ms({"status": "failed", "settled_ms": [1.5]}) == ()


def test_a_try_result_gates_and_shows_its_measured_fixes(nanogpt, tmp_path):
    out = tmp_path / "verdict.json"
    md = tmp_path / "verdict.md"
    r = run_cli(["gate", str(nanogpt["try"]), str(nanogpt["try"]), "--json", str(out),
                 "--markdown", str(md)])
    assert r.exit_code == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "Measured on the candidate's job (advisor profile --try): 2 available measured " \
           "improvements" in text
    assert ("compiler-fusion (KERN004): measured 1.25x (1.15-1.36, 2 runs, 8.964 ms a step), "
            "estimated 1.13x: available measured improvement; changes numerics") in text
    assert "loader-jitter (INPT001): failed: the knob reached nothing" in text
    # written before the plain runs' steps were kept: the profiled steps decide, and it says so
    assert "median over 9 and 9 steady steps" in text
    assert "has no plain_steps_ms" in text
    verdict = json.loads(out.read_text())
    assert verdict["step_time"]["source"] == "profiled"
    cand = verdict["tried"]["candidate"]
    assert cand["improvements"] == ["compiler-fusion", "uncaptured-cuda-graph"]
    assert cand["plain_step_ms"] == [11.1864, 11.2447] and cand["plain_steps"] == 0
    assert [f["measured_speedup"] for f in cand["fixes"]] == [None, 1.2511, 1.6154]
    assert "Measured on the candidate's job" in md.read_text()


def test_junit_and_github_carry_the_measured_fixes(nanogpt, tmp_path):
    """The CI views show what --try measured too: JUnit beside the step-time case's verdict
    (output, not a failure), GitHub as a notice per fix measured faster in every round."""
    import xml.etree.ElementTree as ET

    junit = tmp_path / "gate.xml"
    r = run_cli(["gate", str(nanogpt["plain"]), str(nanogpt["try"]), "--junit", str(junit),
                 "--github-annotations"])
    assert r.exit_code == 0, r.stderr
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0"
    step = next(c for c in root.iter("testcase") if c.get("name") == "step time")
    out = step.find("system-out").text.splitlines()
    assert out[1] == ("Measured on the candidate's job (advisor profile --try): 2 available "
                      "measured improvements")
    assert any("loader-jitter (INPT001): failed: the knob reached nothing" in x for x in out)
    notices = [x for x in r.stdout.splitlines()
               if x.startswith("::notice title=advisor gate%3A measured improvement::")]
    assert len(notices) == 2
    assert "compiler-fusion (KERN004): measured 1.25x" in notices[0]
    # a baseline's fixes are no candidate's improvement: nothing is announced the other way
    r = run_cli(["gate", str(nanogpt["try"]), str(nanogpt["plain"]), "--github-annotations"])
    assert "measured improvement::" not in r.stdout


def test_a_result_without_tried_gates_as_before(nanogpt, tmp_path):
    """The same run without its ``tried``: the same verdict, nothing measured shown."""
    out = tmp_path / "verdict.json"
    r = run_cli(["gate", str(nanogpt["plain"]), str(nanogpt["plain"]), "--json", str(out)])
    assert r.exit_code == 0, r.stderr
    assert "Measured on" not in r.stdout and "--try" not in r.stdout
    verdict = json.loads(out.read_text())
    assert verdict["tried"] == {"baseline": None, "candidate": None}
    mixed = run_cli(["gate", str(nanogpt["plain"]), str(nanogpt["try"])])
    assert mixed.exit_code == 0, mixed.stderr
    assert "the baseline is not a --try result" in " ".join(mixed.stdout.split())
    assert "Measured on the candidate's job" in mixed.stdout
    assert "Measured on the baseline's job" not in mixed.stdout


def test_the_plain_runs_steps_are_the_step_time_evidence(ddp, tmp_path):
    """The DDP job without torch.compile after the job with it: its 2 profiled steady steps
    say nothing (too few); its trials' 38 and 40 unprofiled steps say 21% slower. The profiled
    window still cannot carry an estimate, so the gate fails closed (exit 2), listing the
    regression it found on the trials' steps."""
    profiled = run_cli(["gate", str(ddp["compiled"]), str(ddp["plain"]),
                        "--step-times", "profiled"])
    assert profiled.exit_code == 2
    assert "too few steady steps to compare step times (2 and 2" in profiled.stderr
    out = tmp_path / "verdict.json"
    r = run_cli(["gate", str(ddp["compiled"]), str(ddp["plain"]), "--json", str(out)])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    text = " ".join(r.stdout.split())
    assert "median over 38 and 40 unprofiled --try steps" in text and "-> slower" in text
    assert "step time from the unprofiled steps of the plain --try runs" in text
    assert "its steps cannot carry a verdict" in r.stderr
    verdict = json.loads(out.read_text())
    assert verdict["step_time"]["source"] == "tried"
    assert verdict["step_time"]["verdict"] == "slower"
    assert verdict["step_time"]["change"] == pytest.approx(0.21, abs=0.02)
    assert [x["kind"] for x in verdict["regressions"]] == ["step-time"]
    back = run_cli(["gate", str(ddp["plain"]), str(ddp["compiled"])])
    assert "-> faster" in back.stdout
    assert "compile (compiler-fusion KERN004): measured 1.21x" in " ".join(back.stdout.split())


LOADER = ARCHIVE / "wave5-2026-11-26" / "loader_slow"


@pytest.mark.parametrize("tag", ["03-loader-restarts", "04-loader-num-workers-15"])
def test_a_pass_on_the_plain_runs_steps(tmp_path, tag):
    """ImageNet ResNet-50 with 4 workers (9 profiled steady steps): its plain run against the
    runs with persistent workers and with 15 workers, 30 unprofiled steps each. The medians
    agree within 1% (the workers' bursts move the means, not the typical step): a pass on the
    trials' steps, not on the profiled ones."""
    data = _load(LOADER / "try.json.xz")

    def side(name: str, trial: str) -> Path:
        steps = settled_steps_ms(json.loads((LOADER / f"{trial}.result.json").read_text()))
        assert len(steps) == 30
        data["tried"]["plain_steps_ms"] = [list(steps)]
        return _write(tmp_path, name, data)

    base, cand = side("base.json", "02-plain"), side("cand.json", tag)
    r = run_cli(["gate", str(base), str(cand)])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    text = " ".join(r.stdout.split())
    assert "median over 30 and 30 unprofiled --try steps" in text and "-> unchanged" in text
    assert "loader:num_workers=15: measured 0.82x (1 run, 286.459 ms a step): measured " \
           "slower" in text
    assert "Measured on the candidate's job (advisor profile --try): no fix measured " \
           "faster" not in text  # loader-restarts measured 1.02x in its one round
    assert "loader-restarts (RUN001): measured 1.02x" in text


def test_step_times_tried_needs_them_on_both_sides(ddp, nanogpt):
    r = run_cli(["gate", str(nanogpt["try"]), str(nanogpt["try"]), "--step-times", "tried"])
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("advisor: error:")]
    assert len(errors) == 1 and "--step-times tried needs" in errors[0]
    both = run_cli(["gate", str(ddp["plain"]), str(ddp["plain"]), "--step-times", "tried"])
    assert "median over 40 and 40 unprofiled --try steps" in " ".join(both.stdout.split())
    assert "--step-times" not in both.stderr  # inconclusive only for its 2 profiled steps


BAD_TRIED = [
    ("plain_steps_ms", [[45.0, 0]], "plain_steps_ms"),
    ("plain_steps_ms", [[45.0, -1.0]], "plain_steps_ms"),
    ("plain_steps_ms", [45.0], "plain_steps_ms"),
    ("plain_steps_ms", "fast", "plain_steps_ms"),
    ("plain_step_ms", [0], "plain_step_ms"),
    ("plain_step_ms", [-45.2], "plain_step_ms"),
    ("fixes.measured_speedup", -1.21, "measured_speedup"),
    ("fixes.measured_speedup", 0, "measured_speedup"),
    ("fixes.measured_speedup", None, "measured_speedup"),
    ("fixes.measured_low", 9.0, "measured_low"),
    ("fixes.step_ms", -37.0, "step_ms"),
    ("fixes.status", "great", "status"),
    ("fixes", "all of them", "fixes"),
    ("runs", 0, "runs"),
    ("tried", "yes", "tried"),
    ("tried", [], "tried"),
]


@pytest.mark.parametrize(("field", "value", "word"), BAD_TRIED,
                         ids=[f"{f}={v!r}" for f, v, _ in BAD_TRIED])
def test_bad_tried_content_is_refused_on_one_line(tmp_path, field, value, word):
    data = _load(DDP / "try.json.xz")
    data["tried"]["plain_steps_ms"] = [list(_trial_steps("02-plain"))]
    if field == "tried":
        data["tried"] = value
    elif field.startswith("fixes."):
        data["tried"]["fixes"][0][field.split(".", 1)[1]] = value
    else:
        data["tried"][field] = value
    bad = _write(tmp_path, "bad.json", data)
    good = _ddp_with(tmp_path, "good.json", "02-plain")
    for args in ([str(good), str(bad)], [str(bad), str(good)]):
        r = run_cli(["gate", *args])
        assert r.exit_code == 2, (field, value, r.stdout[-500:])
        assert "Traceback" not in r.stderr
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        errors = [x for x in lines if x.startswith("advisor: error:")]
        assert len(errors) == 1 and word in errors[0] and str(bad) in errors[0], lines


def test_library_callers_get_the_same_checks():
    """`read_tried` without the schema in front (a library caller) refuses as the CLI does."""
    from advisor.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="tried is not a complete"):
        read_tried({"tried": {"runs": 1}}, "x.json")
    with pytest.raises(TraceFormatError, match="an object is expected"):
        read_tried({"tried": 3}, "x.json")
    assert read_tried({}, "x.json") is None
    fix = MeasuredFix("bf16", ("bf16",), ("fp32-matmul",), ("PREC001",), "measured", None,
                      1.05, 0.98, 1.12, 2, 40.0, 1.3, True)
    assert not fix.improvement  # one round measured slower: not an available improvement
    assert "no clear gain" in fix.describe()
