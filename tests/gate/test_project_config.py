"""The project's [tool.advisor] in the gate: the pull request the gate judges may change it.

A fuzzing pass (2026-12-03) put ``select = ["fp8-candidate"]`` in a pyproject.toml beside a real
regression (rng-bound-dropout's fixed step -> its anti-pattern, nsys captures): the gate passed,
and its verdict did not say that the rule that names the regression had not run. It still
applies the project's settings (as to the `advisor profile` runs it gates), and now names every
rule they deselect; ``--isolated`` runs every rule.
"""

from __future__ import annotations

import os

from advisor.errors import ExitCode

from .conftest import SCENARIOS, run_cli

GOOD = SCENARIOS / "rng-bound-dropout" / "good" / "nsys.sqlite.gz"
BAD = SCENARIOS / "rng-bound-dropout" / "bad" / "nsys.sqlite.gz"


def _in(folder, args):
    before = os.getcwd()
    os.chdir(folder)
    try:
        return run_cli(args)
    finally:
        os.chdir(before)


def test_a_regression_fails_the_gate_from_a_project_without_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    r = _in(tmp_path, ["gate", str(GOOD), str(BAD)])
    assert r.exit_code == ExitCode.GATE_FAILED, r.stdout
    assert "deselected" not in r.stdout


def test_rules_the_project_deselects_are_named_in_the_verdict_and_isolated_runs_them(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nselect = ["fp8-candidate"]\n')
    r = _in(tmp_path, ["gate", str(GOOD), str(BAD)])
    text = " ".join(r.stdout.split())
    assert "rules not run, deselected by" in text and "rng-bound-dropout" in text
    assert "--isolated" in text
    isolated = _in(tmp_path, ["gate", "--isolated", str(GOOD), str(BAD)])
    assert isolated.exit_code == ExitCode.GATE_FAILED, isolated.stdout
    assert "deselected" not in isolated.stdout
