"""The verdict as JUnit XML, which every CI system displays as test results.

One test case for the step time and one per installed rule, so a CI dashboard tracks each rule
across runs. A regression is a ``<failure>``; a verdict the gate could not reach is an
``<error>`` (exit 2), never a pass. ElementTree does the escaping.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from advisor.gate.compare import GateResult, Regression

SUITE = "advisor gate"


def _suite(cases: list[ET.Element]) -> bytes:
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    root = ET.Element("testsuites", name=SUITE, tests=str(len(cases)), failures=str(failures),
                      errors=str(errors))
    suite = ET.SubElement(root, "testsuite", name=SUITE, tests=str(len(cases)),
                          failures=str(failures), errors=str(errors), skipped="0")
    suite.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _case(name: str, failures: list[Regression] | None = None, error: str | None = None,
          out: str | None = None) -> ET.Element:
    case = ET.Element("testcase", classname="advisor.gate", name=name)
    for r in failures or []:
        f = ET.SubElement(case, "failure", message=r.summary[:500], type=r.kind)
        f.text = r.summary
    if error is not None:
        e = ET.SubElement(case, "error", message=error[:500], type="inconclusive")
        e.text = error
    if out:
        ET.SubElement(case, "system-out").text = out
    return case


def render_junit(result: GateResult) -> bytes:
    from advisor.engine.registry import load_rules

    step_fail = [r for r in result.failures if r.kind == "step-time"]
    cases = [_case("step time", step_fail,
                   "; ".join(result.inconclusive) or None,
                   f"{result.timing.describe()}: {result.timing.verdict}")]
    for rule in load_rules():
        failing = [r for r in result.failures if r.kind != "step-time" and rule.name in r.rules]
        allowed = [r.summary for r in result.regressions if r.allowed and rule.name in r.rules]
        cases.append(_case(f"{rule.name} ({rule.code})", failing,
                           out="allowed: " + "; ".join(allowed) if allowed else None))
    return _suite(cases)


def render_error_junit(message: str) -> bytes:
    return _suite([_case("comparable runs", error=message)])
