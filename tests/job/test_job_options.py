"""Every `advisor analyze` option means on a job what it means on one trace (or is a one-line error)."""

from __future__ import annotations

import json
import shutil

import pytest

from advisor.cli import main
from tests.conftest import ROOT, session_scheduler

LOADER_JITTER = ROOT / "fixtures/scenarios/loader-jitter/bad/trace.json.gz"


@pytest.fixture(scope="module")
def jitter_job(tmp_path_factory):
    """Two ranks of a real trace with a loader-jitter finding (the rank from the file name)."""
    out = tmp_path_factory.mktemp("jitter")
    for r in range(2):
        shutil.copy(LOADER_JITTER, out / f"rank{r}.json.gz")
    return out


def _job(args, capsys) -> tuple[int, dict | None, str, str]:
    rc = main(["analyze", *args, "--scheduler", session_scheduler(), "--json", "-"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), out, err


def _one_line_error(rc: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return rc == 2 and len(lines) == 1 and lines[0].startswith("advisor: error:")


def test_steps_names_the_step_ranges_of_every_rank(synth_ranks, capsys):
    folder = str(synth_ranks[0].parent)
    _, default, _, _ = _job([folder, "--rank-rules", "none", "-q"], capsys)
    _, forward, _, _ = _job([folder, "--rank-rules", "none", "-q",
                             "--steps", r"^DistributedDataParallel\.forward$"], capsys)
    # the steps are now the forward passes: other ranges (numbered by position), each shorter
    assert forward["job"]["steps"] != default["job"]["steps"]
    assert forward["job"]["median_step_ms"] < default["job"]["median_step_ms"]
    rc, _, _, err = _job([folder, "--steps", "no such range"], capsys)
    assert _one_line_error(rc, err) and "--steps" in err


def test_max_unpacked_caps_every_rank(synth_ranks, capsys):
    rc, _, _, err = _job([str(synth_ranks[0].parent), "--max-unpacked", "1M"], capsys)
    assert _one_line_error(rc, err) and "unpack" in err


def test_pid_is_a_one_line_error_on_a_job(synth_ranks, capsys):
    rc, _, _, err = _job([str(synth_ranks[0].parent), "--pid", "1"], capsys)
    assert _one_line_error(rc, err) and "--pid" in err


def test_select_and_ignore_name_job_rules_too(synth_ranks, capsys):
    folder = str(synth_ranks[0].parent)
    _, only, _, _ = _job([folder, "--select", "straggler-rank", "-q"], capsys)
    assert [f["rule"] for f in only["findings"]] == ["straggler-rank"]
    assert only["rank_findings"] == []  # a selection of job rules only runs no per-rank rule
    _, ignored, _, _ = _job([folder, "--ignore", "DIST002", "--rank-rules", "none", "-q"], capsys)
    assert "straggler-rank" not in [f["rule"] for f in ignored["findings"]]
    rc, _, _, err = _job([folder, "--select", "no-such-rule"], capsys)
    assert _one_line_error(rc, err) and "no-such-rule" in err


def test_rule_option_reaches_the_per_rank_rules(jitter_job, capsys):
    """The option changes the rank's finding exactly as it changes the single trace's."""
    args = ["--select", "loader-jitter", "--rule-option", "loader-jitter.outlier-mads=0", "-q"]
    _, default, _, _ = _job([str(jitter_job), *args[:2], "-q"], capsys)
    _, tight, _, _ = _job([str(jitter_job), *args], capsys)
    assert main(["analyze", str(LOADER_JITTER), *args, "--json", "-"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert [f["message"] for f in tight["rank_findings"]] == [f["message"] for f in single["findings"]]
    assert tight["rank_findings"][0]["message"] != default["rank_findings"][0]["message"]
    rc, _, _, err = _job([str(jitter_job), "--rule-option", "loader-jitter.nope=1"], capsys)
    assert _one_line_error(rc, err) and "nope" in err
    rc, _, _, err = _job([str(jitter_job), "--rule-option", "straggler-rank.x=1"], capsys)
    assert _one_line_error(rc, err) and "min-pace-share" in err  # its options named


def test_rule_option_reaches_the_job_rules(imbalanced_ranks, capsys):
    """A job rule's declared option is set like a rank rule's, range-checked the same way:
    load-imbalance reports the pace passing between ranks until no rank may set any of it."""
    args = [str(imbalanced_ranks[0].parent), "--select", "load-imbalance", "-q"]
    _, found, _, _ = _job(args, capsys)
    assert [f["rule"] for f in found["findings"]] == ["load-imbalance"]
    _, strict, _, _ = _job([*args, "--rule-option", "load-imbalance.max-pace-share=0"], capsys)
    assert strict["findings"] == []
    rc, _, _, err = _job([*args, "--rule-option", "load-imbalance.max-pace-share=2"], capsys)
    assert _one_line_error(rc, err) and "max-pace-share" in err


def test_show_fixes_prints_the_fix_code(jitter_job, capsys):
    _, d, _, _ = _job([str(jitter_job), "-q", "--select", "loader-jitter"], capsys)
    snippet = d["rank_findings"][0]["fix_snippet"]
    first = next(line.strip() for line in snippet.splitlines() if line.strip())
    args = ["analyze", str(jitter_job), "--scheduler", session_scheduler(), "--select",
            "loader-jitter"]
    assert main(args) == 0
    assert first not in capsys.readouterr().out
    assert main([*args, "--show-fixes"]) == 0
    assert first in capsys.readouterr().out


@pytest.mark.parametrize("as_job", [True, False])
def test_html_dash_is_stdout_on_a_job_and_on_one_trace(synth_ranks, tmp_path, capsys, monkeypatch,
                                                       as_job):
    monkeypatch.chdir(tmp_path)
    target = [str(synth_ranks[0].parent), "--rank-rules", "none", "--scheduler",
              session_scheduler()] if as_job \
        else [str(LOADER_JITTER)]
    assert main(["analyze", *target, "--html", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.lstrip().lower().startswith("<!doctype html>") and "</html>" in out
    assert err.strip()  # the console summary went to stderr
    assert not (tmp_path / "-").exists()
    assert main(["analyze", *target, "--html", "-", "--json", "-"]) == 2
    assert _one_line_error(2, capsys.readouterr().err)
