"""CI outputs of a real failing gate (mfu before -> after: +16% step time, NCCL waits tripled):
markdown, JUnit XML, GitHub annotations and the verdict JSON."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import xmlschema

from advisor.gate.compare import GateResult, Regression, compare
from advisor.gate.render.github import command, render_annotations
from advisor.gate.render.junit import render_error_junit, render_junit
from advisor.gate.render.markdown import cell, render_markdown
from advisor.gate.render.result_json import GATE_SCHEMA_VERSION, to_gate_dict

from .conftest import MFU_AFTER, MFU_BEFORE, lift_refusal, needs_traces

pytestmark = needs_traces


@pytest.fixture(scope="module")
def failed(gate_input) -> GateResult:
    return compare(lift_refusal(gate_input(MFU_BEFORE)), lift_refusal(gate_input(MFU_AFTER)))


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


JUNIT_XSD = Path(__file__).parent / "data" / "junit.xsd"


def valid_junit(xml: bytes) -> ET.Element:
    """The XML, once it validated against the strict JUnit schema (one outcome per case)."""
    xmlschema.XMLSchema(JUNIT_XSD).validate(xml.decode("utf-8"))
    return ET.fromstring(xml)


def test_junit_has_a_failure_for_the_step_and_a_case_per_rule(failed):
    root = valid_junit(render_junit(failed))
    suite = root.find("testsuite")
    failing_cases = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert suite.get("failures") == str(len(failing_cases)) and suite.get("errors") == "0"
    assert len(failing_cases) >= 1
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names[0] == "step time" and "host-sync (HOST001)" in names
    assert suite.find("testcase/failure").get("type") == "step-time"


def test_the_schema_rejects_two_outcomes_in_one_case():
    """The check below can fail: the schema refuses what the gate used to write."""
    two = (b'<testsuites><testsuite name="g" tests="1" failures="1" errors="1">'
           b'<testcase classname="c" name="n"><failure type="a">x</failure>'
           b'<error type="b">y</error></testcase></testsuite></testsuites>')
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        valid_junit(two)


def test_junit_keeps_one_outcome_per_case_when_a_rule_regresses_twice(failed):
    """A rule with a worse finding and a new anti-pattern count, and a regression the gate
    cannot decide: each case still has one outcome, the regressions listed in its text."""
    reg = [r for r in failed.regressions if r.kind == "step-time"]
    twice = (Regression("finding", "host-sync (HOST001): worse finding", ("host-sync",),
                        ("HOST001",), False),
             Regression("anti-pattern", "host-sync (HOST001): +2 syncs per step", ("host-sync",),
                        ("HOST001",), False))
    both = replace(failed, regressions=(*reg, *twice), inconclusive=("too noisy",))
    root = valid_junit(render_junit(both))
    case = next(c for c in root.iter("testcase") if c.get("name") == "host-sync (HOST001)")
    assert len(case.findall("failure")) == 1 and "+2 syncs" in case.find("failure").text
    step = next(c for c in root.iter("testcase") if c.get("name") == "step time")
    assert len(step.findall("failure")) == 1 and not step.findall("error")
    assert "too noisy" in step.find("system-out").text


def test_a_refused_verdict_is_one_error_per_case_with_the_reason(gate_input):
    """The FSDP pair as it is: steps shorter than one period cannot carry a verdict."""
    refused = compare(gate_input(MFU_BEFORE), gate_input(MFU_AFTER))
    assert refused.status == "inconclusive" and refused.refused
    root = valid_junit(render_junit(refused))
    step = next(c for c in root.iter("testcase") if c.get("name") == "step time")
    assert "less than one period" in step.find("error").text
    assert "would fail: step time" in step.find("system-out").text


def test_markdown_names_runs_that_share_a_file_name_apart(failed):
    a = replace(failed.baseline, path="runs/main/nsys.sqlite.gz")
    b = replace(failed.candidate, path="runs/pr-12/nsys.sqlite.gz")
    md = render_markdown(replace(failed, baseline=a, candidate=b))
    assert "| baseline | main/nsys.sqlite.gz |" in md
    assert "| candidate | pr-12/nsys.sqlite.gz |" in md


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


def test_junit_keeps_control_characters_from_a_trace_out_of_the_xml(failed):
    """A kernel or GPU name with ESC or NUL in it (a hostile or broken trace) still gives XML a
    strict JUnit consumer accepts; without the output policy (and `xml_text` behind it)
    ElementTree writes them raw."""
    dirty = "kernel\x1b[2J\x00name\x07"
    result = replace(failed, regressions=tuple(replace(r, summary=r.summary + dirty)
                                               for r in failed.regressions))
    root = valid_junit(render_junit(result))
    text = "".join(e.text or "" for e in root.iter("failure"))
    assert "kernel?[2J?name?" in text  # the output policy's mark, as on every stream
    assert valid_junit(render_error_junit("baseline: bad name \x1b]8;;x\x07"))
