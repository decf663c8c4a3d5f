"""Write the CI outputs the user asked for, for a verdict or for a gate that could not run.

A gate that cannot compare still writes its markdown, JUnit and JSON outputs, saying so: a CI
job reading them must see "could not compare", not last run's file or nothing.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import OutputError
from advisor.gate.compare import GateResult
from advisor.output_paths import check_outputs, write_atomic


@dataclass(frozen=True)
class OutputRequest:
    markdown: Path | None = None
    junit: Path | None = None
    json: Path | None = None


def _write(path: Path, data: str | bytes) -> None:
    write_atomic(path, data)


def check_requested(inputs: tuple[Path, ...], req: OutputRequest) -> None:
    """Before any work: no output may be an input, a directory or unwritable (exit 2). When
    one is refused, the others still get the error verdict: none keeps an earlier one."""
    try:
        check_outputs(inputs, {"--markdown": req.markdown, "--junit": req.junit,
                               "--json": req.json})
    except OutputError as e:
        usable = {}
        for name in ("markdown", "junit", "json"):
            path = getattr(req, name)
            try:
                check_outputs(inputs, {f"--{name}": path})
            except OutputError:
                continue
            usable[name] = path
        with contextlib.suppress(OutputError):
            write_error_outputs(str(e), OutputRequest(**usable))
        raise


def clear_outputs(req: OutputRequest) -> None:
    """Remove last run's verdict files before the gate starts its work. They are written once,
    at the end (`write_outputs`, or `write_error_outputs` on any failure the process survives);
    a gate killed meanwhile (SIGTERM, SIGHUP, SIGKILL, a CI timeout) leaves none, so a CI step
    reading them finds no verdict rather than an earlier run's "pass". A link is removed, never
    followed (`check_requested` already refused directories)."""
    for path in (req.markdown, req.junit, req.json):
        if path is None:
            continue
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            raise OutputError(f"{path}: cannot remove the earlier verdict "
                              f"({e.strerror or e})") from e


def write_outputs(result: GateResult, req: OutputRequest) -> None:
    from advisor.gate.render.junit import render_junit
    from advisor.gate.render.markdown import render_markdown
    from advisor.gate.render.result_json import to_gate_dict

    if req.markdown:
        _write(req.markdown, render_markdown(result))
    if req.junit:
        _write(req.junit, render_junit(result))
    if req.json:
        try:  # NaN and Infinity are not JSON: a verdict holding one is no verdict
            text = json.dumps(to_gate_dict(result), indent=2, allow_nan=False) + "\n"
        except ValueError as e:
            raise OutputError(f"{req.json}: the verdict holds a number JSON cannot carry "
                              f"({e}); not written") from e
        _write(req.json, text)


def write_error_outputs(message: str, req: OutputRequest) -> None:
    from advisor.gate.render.junit import render_error_junit
    from advisor.gate.render.markdown import render_error_markdown
    from advisor.gate.render.result_json import error_dict

    # Every output is attempted, so none is left holding an earlier verdict; the first
    # failure is raised after.
    failed: list[OutputError] = []
    for path, render in ((req.markdown, render_error_markdown), (req.junit, render_error_junit),
                         (req.json, lambda m: json.dumps(error_dict(m), indent=2) + "\n")):
        if path:
            try:
                _write(path, render(message))
            except OutputError as e:
                failed.append(e)
    if failed:
        raise failed[0]
