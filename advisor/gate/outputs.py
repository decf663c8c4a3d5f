"""Write the CI outputs the user asked for, for a verdict or for a gate that could not run.

A gate that cannot compare still writes its markdown, JUnit and JSON outputs, saying so: a CI
job reading them must see "could not compare", not last run's file or nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import OutputError
from advisor.gate.compare import GateResult


@dataclass(frozen=True)
class OutputRequest:
    markdown: Path | None = None
    junit: Path | None = None
    json: Path | None = None


def _write(path: Path, data: str | bytes) -> None:
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from e


def write_outputs(result: GateResult, req: OutputRequest) -> None:
    from advisor.gate.junit import render_junit
    from advisor.gate.markdown import render_markdown
    from advisor.gate.result_json import to_gate_dict

    if req.markdown:
        _write(req.markdown, render_markdown(result))
    if req.junit:
        _write(req.junit, render_junit(result))
    if req.json:
        _write(req.json, json.dumps(to_gate_dict(result), indent=2) + "\n")


def write_error_outputs(message: str, req: OutputRequest) -> None:
    from advisor.gate.junit import render_error_junit
    from advisor.gate.markdown import render_error_markdown
    from advisor.gate.result_json import error_dict

    if req.markdown:
        _write(req.markdown, render_error_markdown(message))
    if req.junit:
        _write(req.junit, render_error_junit(message))
    if req.json:
        _write(req.json, json.dumps(error_dict(message), indent=2) + "\n")
