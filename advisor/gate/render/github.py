"""The verdict as GitHub Actions workflow commands (``::error title=...::message``).

Printed to stdout, each line becomes an annotation on the run's summary page. Messages and
properties are escaped as the runner expects (``%``, CR, LF; and ``:``/``,`` in properties), so
a kernel name cannot end the command early; messages built from trace names go through the
output policy (`advisor.safe_text.plain`) first, so a name's newline is a ``?`` as everywhere.
"""

from __future__ import annotations

from advisor.gate.compare import GateResult
from advisor.safe_text import plain, workflow_data, workflow_property


def command(level: str, title: str, message: str) -> str:
    """One workflow command, escaped by `advisor.safe_text` (GitHub's documented escaping).
    ``title`` and ``message`` that hold trace or file names are `plain` already."""
    return f"::{level} title={workflow_property(title)}::{workflow_data(message)}"


def render_annotations(result: GateResult) -> str:
    def annotate(level: str, title: str, message: str) -> str:
        return command(level, plain(title), plain(message))

    lines = []
    for r in result.failures:
        rules = f" [{', '.join(r.rules)}]" if r.rules else ""
        lines.append(annotate("error", f"advisor gate: {r.kind} regression{rules}", r.summary))
    for r in result.regressions:
        if r.allowed:
            lines.append(annotate("notice", "advisor gate: allowed", r.summary))
    lines.extend(annotate("error", "advisor gate: inconclusive", x) for x in result.inconclusive)
    lines.extend(annotate("notice", "advisor gate", n) for n in result.notes
                 if n.startswith("host timing noise"))
    if result.status == "pass":
        lines.append(annotate("notice", "advisor gate: pass", f"step time {result.timing.describe()}"))
    # what `advisor profile --try` measured on the candidate's job: a notice per fix that was
    # faster in every round (information beside the verdict, never an error)
    if result.candidate.tried is not None:
        lines.extend(annotate("notice", "advisor gate: measured improvement", f.describe())
                     for f in result.candidate.tried.improvements)
    return "\n".join(lines) + "\n"


def render_error_annotation(message: str) -> str:
    return command("error", "advisor gate: could not compare", plain(message)) + "\n"

