"""The verdict as GitHub Actions workflow commands (``::error title=...::message``).

Printed to stdout, each line becomes an annotation on the run's summary page. Messages and
properties are escaped as the runner expects (``%``, CR, LF; and ``:``/``,`` in properties), so
a kernel name cannot end the command early.
"""

from __future__ import annotations

from advisor.gate.compare import GateResult
from advisor.safe_text import workflow_data, workflow_property


def command(level: str, title: str, message: str) -> str:
    """One workflow command, escaped by `advisor.safe_text` (GitHub's documented escaping)."""
    return f"::{level} title={workflow_property(title)}::{workflow_data(message)}"


def render_annotations(result: GateResult) -> str:
    lines = []
    for r in result.failures:
        rules = f" [{', '.join(r.rules)}]" if r.rules else ""
        lines.append(command("error", f"advisor gate: {r.kind} regression{rules}", r.summary))
    for r in result.regressions:
        if r.allowed:
            lines.append(command("notice", "advisor gate: allowed", r.summary))
    lines.extend(command("error", "advisor gate: inconclusive", x) for x in result.inconclusive)
    lines.extend(command("notice", "advisor gate", n) for n in result.notes
                 if n.startswith("host timing noise"))
    if result.status == "pass":
        lines.append(command("notice", "advisor gate: pass", f"step time {result.timing.describe()}"))
    return "\n".join(lines) + "\n"


def render_error_annotation(message: str) -> str:
    return command("error", "advisor gate: could not compare", message) + "\n"
