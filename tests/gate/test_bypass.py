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
    return e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")


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


def _slow(base: dict[str, Any]) -> dict[str, Any]:
    """Every timestamp and duration x1.3: the gate fails it as it stands."""
    return {**base, "traceEvents": _untimed(base) + _scaled(base, 1.3)}


def _cut(trace: dict[str, Any], pieces: int) -> dict[str, Any]:
    """Each step range replaced by ``pieces`` ranges end to end, nothing else changed."""
    out, k = [], 0
    for e in trace["traceEvents"]:
        if not (isinstance(e, dict) and _is_step(e)):
            out.append(e)
            continue
        for j in range(pieces):
            out.append({**e, "ts": e["ts"] + j * e["dur"] / pieces, "dur": e["dur"] / pieces,
                        "name": f"ProfilerStep#{100 + k}"})
            k += 1
    return {**trace, "traceEvents": out}


@pytest.mark.parametrize("pieces", [2, 3])
def test_step_ranges_cut_into_pieces_fail_closed(base, tmp_path, pieces):
    """A "step" holding half (a third) of the step's kernels was 38% faster and passed: the
    kernel mix is the same set, only each kernel's count per step is divided."""
    cand = _write(_cut(_slow(base), pieces), tmp_path / "cand.json.gz")
    r = _gate(BASE, cand)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "launches per step of the kernels both run: 0% alike" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _slow_nsys(tmp_path: Path, steps_sql: str) -> tuple[Path, Path]:
    """The nsys capture of the host-sync fixed run (baseline) and a copy with every time x1.3
    and ``steps_sql`` run on it (candidate)."""
    import shutil
    import sqlite3

    src = SCENARIOS / "host-sync" / "good" / "nsys.sqlite.gz"
    base, cand = tmp_path / "base.sqlite", tmp_path / "cand.sqlite"
    with gzip.open(src, "rb") as f, base.open("wb") as out:
        shutil.copyfileobj(f, out)
    shutil.copy(base, cand)
    con = sqlite3.connect(cand)
    t0 = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if "start" in cols:  # every time x1.3
            sets = [f"start = {t0} + CAST((start - {t0}) * 1.3 AS INTEGER)"]
            if "end" in cols:
                sets.append(f'"end" = {t0} + CAST(("end" - {t0}) * 1.3 AS INTEGER)')
            con.execute(f"UPDATE {table} SET {', '.join(sets)}")
    con.executescript(steps_sql)
    con.commit()
    con.close()
    return base, cand


def test_nvtx_step_ranges_cut_in_two_fail_closed(tmp_path):
    """The nsys capture of the same run, its NVTX "step N" ranges each cut in two."""
    base, cand = _slow_nsys(tmp_path, """
        CREATE TEMP TABLE s AS SELECT rowid AS r FROM NVTX_EVENTS WHERE text LIKE 'step %';
        INSERT INTO NVTX_EVENTS(start, "end", eventType, text, globalTid)
            SELECT start + ("end" - start) / 2, "end", eventType, 'step ' || (1000 + rowid),
                   globalTid FROM NVTX_EVENTS WHERE rowid IN (SELECT r FROM s);
        UPDATE NVTX_EVENTS SET "end" = start + ("end" - start) / 2, text = 'step ' || (2000 + rowid)
            WHERE rowid IN (SELECT r FROM s);
    """)
    r = _gate(base, cand)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "launches per step of the kernels both run" in r.stderr


def test_a_job_whose_step_ranges_are_cut_in_three_fails_closed(tmp_path):
    """The job gate checks each rank's workload the same way (`advisor.gate.job`)."""
    jobs = SCENARIOS.parent / "jobs" / "h200x2-ddp" / "torch"
    cand = tmp_path / "cand"
    cand.mkdir()
    for rank in ("rank0.json.gz", "rank1.json.gz"):
        _write(_cut(_load(jobs / "slow-rank" / rank), 3), cand / rank)
    r = _gate(jobs / "baseline", cand)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "launches per step of the kernels both run" in r.stdout


def test_a_decoy_process_with_more_steps_fails_closed(base, tmp_path):
    """The slow run plus two copies of the baseline in a second process (host pid 9000, GPU
    pid 1), after it: the gate compared the copy (the process with the most steps) and passed
    at +0.0%. Named with --pid, the slow process is compared and fails."""
    events = [e for e in base["traceEvents"] if _timed(e)]
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] + (e.get("dur") or 0) for e in events) - t0
    out = _untimed(base) + _scaled(base, 1.3)
    for i in range(2):
        for e in _scaled(base, 1.0, t0, span * (1.4 + 1.05 * i), step_offset=13 * i,
                         id_offset=10**6 * (i + 1)):
            e["pid"] = {1037: 9000, 0: 1}.get(e.get("pid"), e.get("pid"))
            if e.get("tid") == 1037:
                e["tid"] = 9000
            out.append(e)
    cand = _write({**base, "traceEvents": out}, tmp_path / "cand.json.gz")
    r = _gate(BASE, cand)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "the runs hold 1 and 2 processes" in r.stderr and "--pid" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    named = _gate(BASE, cand, "--pid", "1037")
    assert named.exit_code == 1, named.stdout + named.stderr


def _forged(tmp_path: Path, name: str, **steps: Any) -> Path:
    """The baseline's saved result with ``steps`` keys replaced."""
    from .conftest import analysed

    data = copy.deepcopy(analysed(BASE))
    data["steps"].update(steps)
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("name, change, reason", [
    ("maxfloat", lambda t: [1.7976931348623157e308] * len(t), "step times must be numbers"),
    ("denormal", lambda t: [5e-324] * len(t), "step times must be numbers"),
    ("tiny_added", lambda t: t + [1e-9] * 40, "step times must be numbers"),
    ("dup5", lambda t: t * 5, "the result contradicts itself"),
    ("scaled", lambda t: [x / 1.3 for x in t], "the result contradicts itself"),
])
def test_a_saved_result_that_contradicts_itself_fails_closed(tmp_path, name, change, reason):
    """Steady steps forged in a saved result: a float overflow was a traceback, and steps
    duplicated, added or shrunk (sub-nanosecond) against the result's own summary passed."""
    from .conftest import analysed

    times = analysed(BASE)["steps"]["steady_times_ms"]
    good = _forged(tmp_path, "good")
    r = _gate(good, _forged(tmp_path, name, steady_times_ms=change(list(times))))
    assert r.exit_code == 2, r.stdout + r.stderr
    assert reason in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("late", [0.15, 0.25])
def test_step_ranges_starting_late_fail_closed(base, tmp_path, late):
    """Each step range starts 15-25% late (same end): each step's forward falls between the
    steps, and the shortened steps of a 30% slower run passed ("forward -100%")."""
    trace = _slow(base)
    for e in trace["traceEvents"]:
        if isinstance(e, dict) and _is_step(e):
            e["ts"] += e["dur"] * late
            e["dur"] *= 1 - late
    r = _gate(BASE, _write(trace, tmp_path / "cand.json.gz"))
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "the steps do not cover the same work" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_nvtx_step_ranges_starting_late_fail_closed(tmp_path):
    base, cand = _slow_nsys(tmp_path, """UPDATE NVTX_EVENTS
        SET start = start + CAST(("end" - start) * 0.15 AS INTEGER) WHERE text LIKE 'step %';""")
    r = _gate(base, cand)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "the steps do not cover the same work" in r.stderr
