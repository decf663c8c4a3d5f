"""A saved result edited so that it still agrees with itself passed the gate; with
``ADVISOR_RESULT_KEY`` set (a CI secret), only results advisor wrote with that key are compared.

The slow candidate is the host-sync scenario's fixed run with every time scaled by 1.3 (as in
test_bypass.py): the gate fails its trace. Its forged result takes the baseline's steps whole,
consistent with themselves by construction, so the schema and the consistency checks pass it.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from advisor.report import signing

from .conftest import SCENARIOS, run_cli
from .test_bypass import _scaled, _untimed

BASE = SCENARIOS / "host-sync" / "good" / "trace.json.gz"
KEY = "ci-secret-for-the-test"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The baseline's trace, the slow candidate's trace, and each one's result saved by
    `advisor analyze --json` with the key set (signed) and without (unsigned)."""
    d = tmp_path_factory.mktemp("signed")
    with gzip.open(BASE, "rt") as f:
        base = json.load(f)
    slow = d / "slow.json.gz"
    with gzip.open(slow, "wt") as f:
        json.dump({**base, "traceEvents": _untimed(base) + _scaled(base, 1.3)}, f)
    out = {"base_trace": BASE, "slow_trace": slow}
    mp = pytest.MonkeyPatch()
    try:
        for signed in (False, True):
            if signed:
                mp.setenv(signing.KEY_ENV, KEY)
            else:
                mp.delenv(signing.KEY_ENV, raising=False)
            for name in ("base", "slow"):
                path = d / f"{name}-{'signed' if signed else 'unsigned'}.json"
                r = run_cli(["analyze", str(out[f"{name}_trace"]), "--json", str(path)])
                assert r.exit_code == 0, r.stderr
                out[path.stem] = path
    finally:
        mp.undo()
    return out


def _forge(src: Path, steps_from: Path, dest: Path) -> Path:
    """``src``'s result with ``steps_from``'s steps (self-consistent), signature kept as it was."""
    data = json.loads(src.read_text())
    data["steps"] = copy.deepcopy(json.loads(steps_from.read_text())["steps"])
    dest.write_text(json.dumps(data))
    return dest


def _gate(base: Path, cand: Path):
    return run_cli(["gate", str(base), str(cand)])


def test_a_signed_result_carries_the_mac_of_its_content(runs):
    data = json.loads(runs["base-signed"].read_text())
    assert data["signature"]["algorithm"] == "hmac-sha256"
    assert signing.check(data, KEY.encode(), "x") is None
    assert signing.check(data, b"another key", "x") is not None
    assert "signature" not in json.loads(runs["base-unsigned"].read_text())


def test_without_the_key_a_self_consistent_forgery_still_passes(runs, tmp_path, monkeypatch):
    """The hole the key closes, shown: the slow run's trace fails, its forged result passes."""
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    assert _gate(runs["base_trace"], runs["slow_trace"]).exit_code == 1
    forged = _forge(runs["slow-unsigned"], runs["base-unsigned"], tmp_path / "forged.json")
    assert _gate(runs["base-unsigned"], forged).exit_code == 0


def test_with_the_key_a_forged_or_unsigned_result_is_refused(runs, tmp_path, monkeypatch):
    monkeypatch.setenv(signing.KEY_ENV, KEY)
    forged = _forge(runs["slow-signed"], runs["base-signed"], tmp_path / "forged.json")
    for cand, why in ((forged, "signature does not match"), (runs["slow-unsigned"], "unsigned")):
        r = _gate(runs["base-signed"], cand)
        assert r.exit_code == 2, r.stdout + r.stderr
        assert why in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_with_the_key_signed_results_and_traces_are_judged_as_before(runs, monkeypatch):
    monkeypatch.setenv(signing.KEY_ENV, KEY)
    assert _gate(runs["base-signed"], runs["slow-signed"]).exit_code == 1
    assert _gate(runs["base-signed"], runs["base_trace"]).exit_code == 0
    assert _gate(runs["base_trace"], runs["slow_trace"]).exit_code == 1
