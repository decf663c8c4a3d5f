"""Helpers of the hostile-input tests: run the CLI, and check that a case "held".

A case holds when advisor ends in a result (exit 0, or 1 for a gate that fails) or in exactly
one line ``advisor: error: ...`` with exit 2; never a traceback, exit 70, a hang, a changed
input, a file written beside the input, or a line of output that GitHub Actions would run as a
workflow command.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from advisor.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "scenarios"
KINETO = FIXTURES / "host-sync" / "bad" / "trace.json.gz"
NSYS = FIXTURES / "host-sync" / "bad" / "nsys.sqlite.gz"
# A workflow command anywhere at the start of a line (the runner trims leading whitespace);
# the gate's own annotations (--github-annotations) are the only ones allowed.
_COMMAND = re.compile(r"^\s*::", re.MULTILINE)
_OURS = re.compile(r"^::(error|notice) title=advisor gate")


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(args: list[str]) -> Run:
    """``advisor ARGS`` in-process, stdout and stderr apart (the CLI's one error funnel)."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        code = main([str(a) for a in args])
    return Run(code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace"))


def run_process(args: list[str], timeout: float = 120, **kw) -> Run:
    """``advisor ARGS`` in a fresh interpreter (for hangs, signals and resource limits)."""
    env = dict(kw.pop("env", os.environ))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "advisor.cli", *map(str, args)], capture_output=True,
                       text=True, errors="replace", timeout=timeout, env=env, **kw)
    return Run(p.returncode, p.stdout, p.stderr)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(paths: Iterable[Path]) -> dict[Path, object]:
    """Hashes of the inputs and the listing of their directories, to compare after a run."""
    out: dict[Path, object] = {}
    for p in paths:
        if p.is_file():
            out[p] = sha256(p)
        out[p.parent] = sorted(x.name for x in p.parent.iterdir())
    return out


def assert_held(run: Run, before: dict[Path, object] | None = None,
                outputs: Iterable[Path] = (), ok: tuple[int, ...] = (0, 2)) -> None:
    """The case ended in a result or in one error line, and touched nothing it read."""
    assert run.exit_code in ok, (run.exit_code, run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    if run.exit_code == 2:
        lines = [x for x in run.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith(("advisor: error:", "Error:")), lines[:5]
    for stream in (run.stdout, run.stderr):
        for m in _COMMAND.finditer(stream):
            line = stream[m.start():].split("\n", 1)[0]
            assert _OURS.match(line.lstrip()), f"workflow command in output: {line[:120]!r}"
        assert "\x1b" not in stream and "\x07" not in stream, "terminal control in output"
    made = {o.name for o in outputs}
    for path, value in (before or {}).items():
        if isinstance(value, str):
            assert sha256(path) == value, f"{path} was modified"
        else:
            now = sorted(x.name for x in path.iterdir() if x.name not in made)
            assert now == [x for x in value if x not in made], f"files written beside {path}"
