"""CI outputs of a real failing gate (mfu before -> after: +16% step time, NCCL waits tripled):
markdown, JUnit XML, GitHub annotations and the verdict JSON."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from advisor.gate.compare import GateResult, compare
from advisor.gate.github import command, render_annotations
from advisor.gate.junit import render_error_junit, render_junit
from advisor.gate.markdown import cell, render_markdown
from advisor.gate.result_json import GATE_SCHEMA_VERSION, to_gate_dict

from .conftest import MFU_AFTER, MFU_BEFORE, needs_traces

pytestmark = needs_traces


@pytest.fixture(scope="module")
def failed(gate_input) -> GateResult:
    return compare(gate_input(MFU_BEFORE), gate_input(MFU_AFTER))


def test_the_real_regression_is_a_step_time_failure_attributed_to_communication(failed):
    assert failed.status == "fail"
    reg = next(f for f in failed.failures if f.kind == "step-time")
    assert "communication +1.1" in reg.summary
    assert failed.attribution.kernels_ms[0].name == "ncclDevKernel_SendRecv"
    assert not failed.host_noise.is_noise  # the host is slower too, but so is the GPU's NCCL


def test_markdown_escapes_kernel_names():
    assert cell("k<4, a|b*c_d>") == r"k&lt;4, a\|b\*c\_d&gt;"


def test_markdown_summary_has_verdict_and_attribution(failed):
    md = render_markdown(failed)
    assert md.startswith("## ❌ advisor gate: regression")
    assert "### Regressions" in md and "ncclDevKernel\\_SendRecv" in md
    widths: list[int] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            widths.append(line.count("|") - line.count("\\|"))
        elif widths:
            assert len(set(widths)) == 1, widths  # no escaped name broke a table row
            widths = []


def test_junit_has_a_failure_for_the_step_and_a_case_per_rule(failed):
    root = ET.fromstring(render_junit(failed))
    suite = root.find("testsuite")
    assert suite.get("failures") == str(len(failed.failures)) and suite.get("errors") == "0"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names[0] == "step time" and "host-sync (HOST001)" in names
    assert suite.find("testcase/failure").get("type") == "step-time"


def test_junit_for_a_gate_that_could_not_run_is_an_error():
    root = ET.fromstring(render_error_junit("baseline: no such file"))
    assert root.get("errors") == "1" and root.find(".//error").text == "baseline: no such file"


def test_annotations_are_escaped_workflow_commands(failed):
    lines = render_annotations(failed).splitlines()
    assert lines[0].startswith("::error title=advisor gate%3A step-time regression")
    assert "::step time +" in lines[0]
    assert "%25" in lines[0]  # the percent sign of "+15.7%" is escaped
    assert command("warning", "a:b,c", "x\ny%") == "::warning title=a%3Ab%2Cc::x%0Ay%25"


def test_verdict_json_is_versioned_and_complete(failed):
    d = to_gate_dict(failed)
    assert d["gate_schema_version"] == GATE_SCHEMA_VERSION
    assert d["status"] == "fail" and d["exit_code"] == 1
    assert d["step_time"]["verdict"] == "slower" and d["step_time"]["p_slower"] < 0.05
    assert d["attribution"]["categories_ms"][0]["name"] == "communication"
