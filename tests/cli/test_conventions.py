"""`advisor analyze` behaves as CI users expect, on the bundled H100 example and a real scenario:
``--json -`` on stdout, fix code on demand, 80 columns, rules excluded and configured from the
command line and from ``[tool.advisor]`` in pyproject.toml, progress only on a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from advisor.cli import main
from advisor.report.json_report import SCHEMA_PATH
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "advisor" / "examples" / "h100-host-sync.sqlite.gz"
JITTER = ROOT / "fixtures" / "scenarios" / "loader-jitter" / "bad" / "nsys.sqlite.gz"


def advisor(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess:
    """``advisor ARGS`` run from ``cwd`` in-process (`advisor.cli.main`, stdout and stderr apart,
    neither a terminal: what a CI log gets), with the terminal width and type a CI runner
    sets. A process of its own only where the test is about one: the terminal
    (`_on_a_terminal`) and `advisor profile`, which starts the user's script (`advisor_process`)."""
    env = {"COLUMNS": str(columns), "TERM": "dumb"}
    with contextlib.chdir(cwd), CliRunner().isolation(env=env) as (out, err, _):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue().decode(errors="replace"),
                                       err.getvalue().decode(errors="replace"))


def advisor_process(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"}
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def findings(stdout: str) -> dict[str, dict]:
    return {f["rule"]: f for f in json.loads(stdout)["findings"]}


@pytest.fixture(scope="module")
def example_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    cwd = tmp_path_factory.mktemp("json-stdout")
    return advisor("analyze", str(EXAMPLE), "--json", "-", "--show-fixes", cwd=cwd), cwd


def test_json_dash_writes_the_result_to_stdout_and_the_summary_to_stderr(example_run):
    run, cwd = example_run
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    assert "host-sync" in {f["rule"] for f in data["findings"]}
    assert "Steps: 12 found" in run.stderr
    assert list(cwd.iterdir()) == []  # no file named "-"


def test_quiet_json_dash_prints_only_json(tmp_path):
    run = advisor("analyze", str(EXAMPLE), "--json", "-", "-q", cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == ""
    assert json.loads(run.stdout)["findings"]


def test_show_fixes_prints_each_findings_fix_code(example_run, tmp_path):
    run, _ = example_run
    shown = " ".join(run.stderr.split())  # lines over 80 columns are wrapped, not cut
    for f in json.loads(run.stdout)["findings"]:
        for line in f["fix"]["snippet"].splitlines():
            assert " ".join(line.split()) in shown
    plain = advisor("analyze", str(EXAMPLE), cwd=tmp_path)
    snippet = json.loads(run.stdout)["findings"][0]["fix"]["snippet"].splitlines()[0]
    assert snippet.strip() not in plain.stdout


def test_the_console_fits_80_columns_without_cutting_words(example_run):
    run, _ = example_run
    lines = run.stderr.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert "…" not in run.stderr
    # the finding's message is all there, wrapped, not cut
    message = next(iter(json.loads(run.stdout)["findings"]))["message"]
    assert " ".join(message.split()) in " ".join(run.stderr.split())


@pytest.mark.parametrize("flag", ["--ignore=host-sync", "--ignore=HOST001",
                                  "--select=loader-jitter,pageable-memcpy"])
def test_rules_are_excluded_from_the_command_line(flag, tmp_path):
    run = advisor("analyze", str(EXAMPLE), "--json", "-", "-q", flag, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "host-sync" not in findings(run.stdout)


def _pyproject(folder: Path, body: str) -> None:
    (folder / "pyproject.toml").write_text(f'[project]\nname = "train"\n\n[tool.advisor]\n{body}')


def test_pyproject_settings_are_found_from_a_subfolder_and_isolated_ignores_them(tmp_path):
    _pyproject(tmp_path, 'ignore = ["host-sync"]\n')
    sub = tmp_path / "jobs" / "nightly"
    sub.mkdir(parents=True)
    run = advisor("analyze", str(EXAMPLE), "--json", "-", "-q", cwd=sub)
    assert run.returncode == 0, run.stderr
    assert "host-sync" not in findings(run.stdout)
    run = advisor("analyze", str(EXAMPLE), "--json", "-", "-q", "--isolated", cwd=sub)
    assert "host-sync" in findings(run.stdout)


def _outlier_steps(run: subprocess.CompletedProcess) -> float:
    assert run.returncode == 0, run.stderr
    return findings(run.stdout)["loader-jitter"]["evidence"]["quantities"]["outlier_steps"]


def test_a_rule_option_changes_what_the_rule_counts_from_cli_and_from_pyproject(tmp_path):
    """loader-jitter's outlier-mads on the H100 jitter scenario: a lower bound counts at least
    as many outlier steps as the default, a very high one none; pyproject and CLI agree, and the
    command line wins over the file."""
    base = ["analyze", str(JITTER), "--select", "loader-jitter", "--json", "-", "-q"]
    default = _outlier_steps(advisor(*base, cwd=tmp_path))
    strict = _outlier_steps(advisor(*base, "--rule-option", "loader-jitter.outlier-mads=1",
                                    cwd=tmp_path))
    lax = _outlier_steps(advisor(*base, "--rule-option", "loader-jitter.outlier-mads=1000",
                                 cwd=tmp_path))
    assert strict > default > lax == 0
    _pyproject(tmp_path, "[tool.advisor.options.loader-jitter]\noutlier-mads = 1\n")
    assert _outlier_steps(advisor(*base, cwd=tmp_path)) == strict
    assert _outlier_steps(advisor(*base, "--rule-option", "loader-jitter.outlier-mads=1000",
                                  cwd=tmp_path)) == lax


@pytest.mark.parametrize(("body", "args", "error"), [
    ('colour = "red"\n', [], "unknown key(s) colour"),
    ('ignore = "host-sync"\n', [], "ignore must be a list"),
    ('ignore = ["no-such-rule"]\n', [], "unknown rule(s): no-such-rule"),
    ("[tool.advisor.options.loader-jitter]\noutlier = 3\n", [], "has no option 'outlier'"),
    ('[tool.advisor.options.loader-jitter]\noutlier-mads = "many"\n', [], "must be a number"),
    ("ignore = [\n", [], "cannot read it as TOML"),
    ("", ["--rule-option", "loader-jitter.outlier-mads"], "is not RULE.KEY=VALUE"),
    ("", ["--rule-option", "loader-jitter.outlier-mads=lots"], "must be a number"),
])
def test_a_bad_setting_is_one_line_and_exit_2(body, args, error, tmp_path):
    _pyproject(tmp_path, body)
    run = advisor("analyze", str(EXAMPLE), "-q", *args, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and error in run.stderr, run.stderr


def _on_a_terminal(*args: str, cwd: Path) -> str:
    """Run advisor with stderr on a pseudo-terminal; what the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=follower, env={**os.environ,
                                                                           "COLUMNS": "100"})
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=HANG_GUARD_S)
    os.close(leader)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))


def test_progress_shows_on_a_terminal_and_never_when_piped_or_quiet(tmp_path):
    html = tmp_path / "r.html"
    shown = _on_a_terminal("analyze", str(EXAMPLE), "--html", str(html), cwd=tmp_path)
    assert "✓ read h100-host-sync.sqlite.gz: " in shown and "12 steps found" in shown
    assert "✓ rules: " in shown and f"✓ wrote {html}" in shown
    assert "✓" not in _on_a_terminal("analyze", str(EXAMPLE), "-q", cwd=tmp_path)
    piped = advisor("analyze", str(EXAMPLE), "--html", str(html), cwd=tmp_path)
    assert "✓" not in piped.stderr + piped.stdout


def test_the_rule_list_fits_80_columns_and_a_rule_page_lists_its_options(tmp_path):
    from advisor.engine.registry import load_rules

    listing = advisor("rules", cwd=tmp_path)
    assert listing.returncode == 0 and max(len(x) for x in listing.stdout.splitlines()) <= 80
    assert all(f"{r.code} {r.name}" in listing.stdout for r in load_rules())
    page = advisor("rules", "loader-jitter", cwd=tmp_path)
    assert "outlier-mads" in page.stdout and "[tool.advisor.options.loader-jitter]" in page.stdout


def test_profile_shows_its_progress_on_a_terminal_only(tmp_path):
    """A real (tiny, CPU) training script under `advisor profile`."""
    script = ROOT / "tests" / "capture" / "scripts" / "train_mlp.py"
    args = ("profile", "--wait", "2", "--steps", "3", "--out", str(tmp_path / "out"), str(script),
            "--iters", "8")
    shown = _on_a_terminal(*args, cwd=tmp_path)
    assert "recording steps 2-4" in shown and "3 steps recorded" in shown
    assert "✓ read trace_rank0.json.gz: " in shown and "✓ rules: " in shown
    piped = advisor_process(*args, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "Steps: 3 found" in piped.stderr  # the summary, not the progress
    assert "recording steps" not in piped.stderr and "✓" not in piped.stderr


def test_the_gate_analyses_traces_with_the_projects_rules(tmp_path):
    """The example against itself passes either way; with host-sync ignored in pyproject.toml
    its findings leave the gate's comparison, as they would leave `advisor analyze`."""
    out = tmp_path / "gate.json"
    run = advisor("gate", str(EXAMPLE), str(EXAMPLE), "--json", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "host-sync" in {f["rule"] for f in json.loads(out.read_text())["findings"]}
    _pyproject(tmp_path, 'ignore = ["host-sync"]\n')
    run = advisor("gate", str(EXAMPLE), str(EXAMPLE), "--json", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "host-sync" not in {f["rule"] for f in json.loads(out.read_text())["findings"]}
