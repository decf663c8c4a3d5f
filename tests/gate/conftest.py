"""Shared pieces of the gate tests: real traces, cached gate inputs, and a CLI runner that goes
through `advisor.cli.main`, the error funnel that decides exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli import main
from advisor.gate.inputs import GateInput, from_dict

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
SCENARIOS = REPO / "fixtures" / "scenarios"

MFU_BEFORE = TRACES / "nsys-ai" / "mfu_2gpu_before.sqlite"
MFU_AFTER = TRACES / "nsys-ai" / "mfu_2gpu_after.sqlite"
H100_1S = TRACES / "nsys-ai" / "h100_2gpu_1s.sqlite"
NO_STEPS = TRACES / "nsys-ai" / "mock.sqlite"  # two kernels, no repeating step
HTA_CONTROL = TRACES / "hta" / "trace_diff" / "control" / "control.json.gz"  # A100
HTA_TEST = TRACES / "hta" / "trace_diff" / "test" / "test.json.gz"  # V100

needs_traces = pytest.mark.skipif(
    not (TRACES / "SOURCES.md").exists(),
    reason=f"shared traces not found at {TRACES} (they sit beside the repository)",
)


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(args: list[str]) -> CliResult:
    """Run ``advisor ARGS`` in-process with stdout and stderr kept apart (click >= 8.2)."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        code = main(args)
    return CliResult(code, out.getvalue().decode(), err.getvalue().decode())


_RESULTS: dict[Path, dict[str, Any]] = {}


def analysed(path: Path) -> dict[str, Any]:
    """The JSON result of a trace, analysed once per session: analysis is the slow part."""
    if path not in _RESULTS:
        from advisor.analysis import analyze
        from advisor.report.json_report import to_dict

        _RESULTS[path] = to_dict(analyze(path))
    return _RESULTS[path]


@pytest.fixture(scope="session")
def gate_input() -> Callable[[Path], GateInput]:
    """`load_input` of a trace, from the session's cached analysis (same code path after it)."""

    def load(path: Path) -> GateInput:
        return from_dict(analysed(path), str(path), "trace")

    return load


def lift_refusal(x: GateInput) -> GateInput:
    """``x`` with its steps taken as steps. The nsys-ai FSDP captures hold less than one
    training step: advisor infers per-layer pieces, and the gate refuses them a verdict
    (`advisor.engine.step_basis`, tested in tests/gate/test_step_basis.py). Their pieces are
    still real, repeated GPU work with a real slowdown between the two captures, which is what
    the tests of the comparison's mechanics need; they lift the refusal explicitly."""
    assert x.withheld, "this input carries a verdict already: use it as it is"
    return replace(x, withheld=None)


@pytest.fixture(scope="session")
def saved_result(tmp_path_factory) -> Callable[[Path], Path]:
    """The trace's ``advisor analyze --json`` file, written from the cached analysis."""
    out_dir = tmp_path_factory.mktemp("results")

    def save(path: Path) -> Path:
        out = out_dir / ("-".join(path.parts[-3:]).replace(".", "_") + ".json")
        if not out.exists():
            out.write_text(json.dumps(analysed(path), indent=2) + "\n")
        return out

    return save
