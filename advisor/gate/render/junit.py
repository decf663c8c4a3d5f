"""The verdict as JUnit XML, which every CI system displays as test results.

One test case for the step time and one per installed rule, so a CI dashboard tracks each rule
across runs. A regression is a ``<failure>``; a verdict the gate could not reach is an
``<error>`` (exit 2), never a pass. A test case holds at most one of them, as the JUnit schema
requires (strict consumers reject a second): several regressions of one case are one failure
whose text lists them all; when the gate refused a verdict, the error wins and the regressions
it would have reported go to ``system-out``. ElementTree does the escaping; every line of text
first goes through the output policy (`advisor.safe_text.plain`), as a CI page or log shows it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from advisor.gate.compare import GateResult, Regression
from advisor.gate.render.text import tried_lines
from advisor.safe_text import no_ci_commands, plain

SUITE = "advisor gate"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold even escaped (C0 controls such as ESC from a kernel or GPU
name): ElementTree would write them raw and strict JUnit consumers reject the file."""


def xml_text(text: str) -> str:
    """Trace-derived text as XML 1.0 can carry it: each forbidden character becomes U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _lines(texts: list[str]) -> str:
    """Lines of text, each one made safe (a name's own newline never starts a line)."""
    return no_ci_commands("\n".join(plain(t) for t in texts))


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
          out: str | list[str] | None = None, error_wins: bool = False) -> ET.Element:
    case = ET.Element("testcase", classname="advisor.gate", name=xml_text(name))
    failures = failures or []
    lines = list(out) if isinstance(out, list) else [out] if out else []
    if failures and not (error is not None and error_wins):
        text = xml_text(_lines([r.summary for r in failures]))
        kinds = sorted({r.kind for r in failures})
        f = ET.SubElement(case, "failure",
                          message=xml_text(_lines(["; ".join(r.summary for r in failures)])[:500]),
                          type=kinds[0] if len(kinds) == 1 else "+".join(kinds))
        f.text = text
        if error is not None:
            lines.append(f"also inconclusive: {error}")
    elif error is not None:
        e = ET.SubElement(case, "error", message=xml_text(_lines([error])[:500]),
                          type="inconclusive")
        e.text = xml_text(_lines([error]))
        lines += [f"would fail: {r.summary}" for r in failures]
    if lines:
        ET.SubElement(case, "system-out").text = xml_text(_lines(lines))
    return case


def render_junit(result: GateResult) -> bytes:
    from advisor.engine.registry import load_rules

    step_fail = [r for r in result.failures if r.kind == "step-time"]
    refused = "; ".join(result.inconclusive) if result.refused else None
    # the fixes `advisor profile --try` measured go beside the step time's verdict, as output:
    # they never change it (`advisor.gate.render.text.tried_lines`)
    cases = [_case("step time", step_fail,
                   "; ".join(result.inconclusive) or None,
                   [f"{result.timing.describe()}: {result.timing.verdict}",
                    *tried_lines(result)],
                   error_wins=result.refused)]
    for rule in load_rules():
        failing = [r for r in result.failures if r.kind != "step-time" and rule.name in r.rules]
        allowed = [r.summary for r in result.regressions if r.allowed and rule.name in r.rules]
        cases.append(_case(f"{rule.name} ({rule.code})", failing, refused if failing else None,
                           out="allowed: " + "; ".join(allowed) if allowed else None,
                           error_wins=True))
    return _suite(cases)


def render_error_junit(message: str) -> bytes:
    return _suite([_case("comparable runs", error=message)])
