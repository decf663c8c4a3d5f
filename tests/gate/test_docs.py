"""docs/gate.md and the example workflow agree with the code (black's test_docs idea)."""

from __future__ import annotations

import re
import shlex

import pytest

from advisor.commands.gate import command as gate_command
from advisor.errors import ExitCode

from .conftest import REPO

DOC = REPO / "docs" / "gate.md"
WORKFLOW = REPO / "docs" / "examples" / "github-actions-gate.yml"


def _gate_options() -> set[str]:
    return {opt for p in gate_command.params for opt in getattr(p, "opts", [])
            if opt.startswith("--")}


def test_the_documented_synopsis_lists_every_option():
    synopsis = DOC.read_text().split("```")[1]
    assert set(re.findall(r"--[a-z-]+", synopsis)) == _gate_options()


def test_the_exit_code_table_matches_the_code():
    text = DOC.read_text()
    for code, meaning in ((ExitCode.OK, "pass"), (ExitCode.GATE_FAILED, "regression"),
                          (ExitCode.BAD_INPUT, "could not compare")):
        assert re.search(rf"^\| {int(code)} \| {meaning}", text, re.M), code


def test_the_example_workflow_parses_and_uses_real_options():
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load(WORKFLOW.read_text())
    steps = flow["jobs"]["gate"]["steps"]
    scripts = " ".join(s.get("run", "") for s in steps)
    gate_line = scripts[scripts.index("advisor gate"):].split("\n")[0:3]
    words = shlex.split(" ".join(x.rstrip("\\") for x in gate_line))
    used = {w for w in words if w.startswith("--")}
    assert used and used <= _gate_options()
    assert any("upload-artifact" in s.get("uses", "") for s in steps)
    assert "html" in scripts and "GITHUB_STEP_SUMMARY" in scripts
    assert steps[-1]["run"].startswith("exit")  # the job fails with the gate's exit code
