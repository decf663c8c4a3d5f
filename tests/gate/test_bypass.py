"""Crafted candidates that once passed the gate although 30% slower (a fuzzing campaign): each
test transforms a real fixture trace the way the crafted case was built and checks that the gate
now fails or fails closed (exit 2 with a one-line reason), never passes.

The slow candidate is the host-sync scenario's fixed run with every timestamp and duration
scaled by 1.3: the gate fails it as it stands; each bypass dressed it up.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import SCENARIOS, run_cli

BASE = SCENARIOS / "host-sync" / "good" / "trace.json.gz"

needs_base = pytest.mark.skipif(not BASE.exists(), reason=f"{BASE} not checked out")
pytestmark = needs_base


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _write(trace: dict[str, Any], path: Path) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    return path


def _timed(e: Any) -> bool:
    return isinstance(e, dict) and isinstance(e.get("ts"), (int, float))


def _is_step(e: dict[str, Any]) -> bool:
    return e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")


def _scaled(trace: dict[str, Any], k: float, t0: float | None = None, offset: float = 0.0,
            step_offset: int = 0, id_offset: int = 0) -> list[dict[str, Any]]:
    """The trace's timed events, every time scaled by ``k`` from ``t0`` and moved by
    ``offset``; step numbers and correlation ids moved so that copies do not collide."""
    events = [e for e in trace["traceEvents"] if _timed(e)]
    t0 = min(e["ts"] for e in events) if t0 is None else t0
    out = []
    for e in events:
        f = copy.deepcopy(e)
        f["ts"] = t0 + offset + (f["ts"] - t0) * k
        if isinstance(f.get("dur"), (int, float)):
            f["dur"] *= k
        if step_offset and _is_step(f):
            f["name"] = f"ProfilerStep#{int(f['name'].split('#')[1]) + step_offset}"
        args = f.get("args")
        if id_offset and isinstance(args, dict):
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += id_offset
        if id_offset and isinstance(f.get("id"), int):
            f["id"] += id_offset
        out.append(f)
    return out


def _untimed(trace: dict[str, Any]) -> list[Any]:
    return [e for e in trace["traceEvents"] if not _timed(e)]


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return _load(BASE)


def _gate(base_path: Path, cand_path: Path, *extra: str):
    return run_cli(["gate", str(base_path), str(cand_path), *extra])


def test_a_regression_after_the_first_thirty_steps_fails(base, tmp_path):
    """40 steps as fast as the baseline, then 30 steps 30% slower: the gate used to load the
    first 30 steady steps only (`advisor analyze`'s window) and passed (+2.8%)."""
    events = [e for e in base["traceEvents"] if _timed(e)]
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] + (e.get("dur") or 0) for e in events) - t0
    out, offset = _untimed(base), 0.0
    for i, k in enumerate((1.0,) * 4 + (1.3,) * 3):
        out += _scaled(base, k, t0, offset, step_offset=10 * i, id_offset=10**6 * (i + 1))
        offset += span * (k + 0.05)
    cand = _write({**base, "traceEvents": out}, tmp_path / "cand.json.gz")
    r = _gate(BASE, cand)
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "69 steady steps" in r.stdout and "slower" in r.stdout
    capped = _gate(BASE, cand, "--max-steps", "30")
    assert "30 of 69 steady steps" in capped.stdout, capped.stdout
    assert "judged on 30 of 69 steady steps" in capped.stdout
