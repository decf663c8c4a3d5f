"""The plain-text verdict for stdout: CI logs show it as is, so no colour and no tables.

Lines are wrapped at 80 columns (continuations indented under their item): the run lines
carried the step description after an embedded newline, which the safe-text pass turned into a
stray "?" on one 200-column line.
"""

from __future__ import annotations

import textwrap

from advisor.gate.attribution import Change
from advisor.gate.compare import GateResult
from advisor.gate.inputs import GateInput
from advisor.safe_text import no_ci_commands, plain

NOISE = "host timing noise"
_LINE_LIMIT = 4000
WIDTH = 80
HEADLINE = {
    "pass": "PASS: the candidate may merge",
    "fail": "FAIL: the candidate regressed",
    "inconclusive": "INCONCLUSIVE: the runs could not be compared (failing closed)",
}


def _run(role: str, x: GateInput) -> list[str]:
    """The run's lines: each its own line of the verdict (a newline inside one would become the
    policy's ``?``)."""
    lines = [f"  {role:<9} {x.path} ({x.trace_format}, {x.steps_judged}, "
             f"step {x.step_ms:.3f} ms, median {x.median_ms:.3f} ms as traced)"]
    if x.steps_described:
        lines.append(f"  {'':<9} {x.steps_described}")
    return lines


def wrap(line: str) -> list[str]:
    """One output line as lines of at most `WIDTH` columns; a continuation is indented under
    the text of its item (after a "- " bullet)."""
    if len(line) <= WIDTH:
        return [line]
    body = line.lstrip(" ")
    indent = len(line) - len(body) + (2 if body.startswith("- ") else 0)
    if body.startswith(("baseline ", "candidate ")):
        indent = 12  # under the path, as the step description below it
    indent = min(indent, 12)
    return textwrap.wrap(line, WIDTH, subsequent_indent=" " * indent, break_long_words=True,
                         break_on_hyphens=False, drop_whitespace=True) or [line[:WIDTH]]


def fmt_change(c: Change, unit: str = "ms") -> str:
    rel = f", {c.relative:+.0%}" if c.relative is not None and c.base else ""
    if unit == "ms":
        return f"{c.name}: {c.base:.3f} -> {c.cand:.3f} ms ({c.delta:+.3f}{rel})"
    return f"{c.name}: {c.base:g} -> {c.cand:g}{rel}"


def attribution_lines(result: GateResult) -> list[str]:
    a = result.attribution
    lines = [fmt_change(c) for c in (a.gpu_busy_ms, a.gpu_idle_ms) if c is not None]
    sections = (
        ("kernel categories", a.categories_ms[:5], "ms"),
        ("kernels", a.kernels_ms[:5], "ms"),
        ("per-step counts", a.counts, ""),
        ("phases", a.phases_ms[:5], "ms"),
        ("GPU idle while the host was in", a.idle_causes_ms[:5], "ms"),
    )
    for title, rows, unit in sections:
        if rows:
            lines.append(f"{title}:")
            lines.extend(f"  {fmt_change(c, unit)}" for c in rows)
    return lines


def tried_lines(result: GateResult) -> list[str]:
    """The fixes `advisor profile --try` measured on either run, beside the verdict: the
    candidate's improvements first, as what the change could still gain."""
    out: list[str] = []
    for role, x in (("candidate", result.candidate), ("baseline", result.baseline)):
        if x.tried is None:
            continue
        found = x.tried.improvements
        head = (f"{len(found)} available measured improvement{'s' if len(found) != 1 else ''}"
                if found else "no fix measured faster")
        out.append(f"Measured on the {role}'s job (advisor profile --try): {head}")
        out.extend(f"  - {f.describe()}" for f in x.tried.fixes)
        if not x.tried.fixes:
            out.append("  - nothing was tried")
    return out


def render_text(result: GateResult) -> str:
    out = [f"advisor gate: {HEADLINE[result.status]}",
           *_run("baseline", result.baseline), *_run("candidate", result.candidate),
           f"  step time {result.timing.describe()} -> {result.timing.verdict}"
           f" (threshold {result.policy.threshold:.0%})"]
    noise = [n for n in result.notes if n.startswith(NOISE)]
    if noise:
        out.append(f"  host timing noise, not a regression: {noise[0].split(', but ', 1)[-1]}")
    if result.failures:
        out.append("Regressions:")
        out.extend(f"  - {r.summary}" for r in result.failures)
        rules = sorted({r for reg in result.failures for r in reg.rules})
        if rules:
            out.append(f"Rules: {', '.join(rules)}")
    allowed = [r for r in result.regressions if r.allowed]
    if allowed:
        out.append("Allowed (--allow):")
        out.extend(f"  - {r.summary}" for r in allowed)
    if result.inconclusive:
        out.append("Inconclusive:")
        out.extend(f"  - {x}" for x in result.inconclusive)
    fixed = [f for f in result.findings if f.status in ("fixed", "better")]
    if fixed:
        out.append("Improved:")
        out.extend(f"  - {f.rule} ({f.code}): {f.status}, {f.base_saved_ms:.3f} -> "
                   f"{f.cand_saved_ms:.3f} ms/step" for f in fixed)
    out.extend(tried_lines(result))
    lines = attribution_lines(result)
    if lines:
        out.append("Where the time moved (per step, baseline -> candidate):")
        out.extend(f"  {x}" for x in lines)
    notes = [n for n in result.notes if not n.startswith(NOISE)]
    if notes:
        out.append("Notes:")
        out.extend(f"  - {n}" for n in notes)
    # Names in these lines come from the traces (and file names): each line is made safe as a
    # whole by the output policy (advisor.safe_text), then no line may start a CI command.
    return no_ci_commands(
        "\n".join(w for x in out for w in wrap(plain(x, _LINE_LIMIT))) + "\n")
