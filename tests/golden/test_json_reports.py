"""`advisor analyze --json` writes, byte for byte, what main wrote before issue #16's refactor.

The golden files (`tests/golden/json/`) were recorded by ``python tests/golden/json_reports.py
--write`` from main's code before the report model (`advisor.report.model`) replaced the
renderers' own computations; `json_reports.normalise` says which two machine-dependent fields
are normalised. A change of the JSON is a change of the contract: re-record on purpose, after
review, never to make this pass.
"""

from __future__ import annotations

import json

import pytest

from advisor.report.json_report import write_json
from tests.golden.conftest import analysis_of
from tests.golden.json_reports import GOLDEN_DIR, ROOT, golden_path, normalise, render, trace_keys

KEYS = trace_keys()


def test_every_test_trace_has_a_golden_and_every_golden_a_trace():
    assert len(KEYS) > 50
    missing = [k for k in KEYS if not golden_path(k).exists()]
    assert not missing, f"no golden JSON for {missing}: python tests/golden/json_reports.py --write"
    stale = sorted({p.name for p in GOLDEN_DIR.glob("*.json")} - {golden_path(k).name for k in KEYS})
    assert not stale, f"golden JSON of traces no longer swept (fixtures/manifest.toml): {stale}"


@pytest.mark.grouped_by("trace_key")
@pytest.mark.parametrize("trace_key", KEYS)
def test_json_is_byte_identical_to_the_golden(trace_key, tmp_path):
    key, analysis = trace_key, analysis_of(trace_key)
    assert not isinstance(analysis, Exception), f"{key}: {analysis}"
    out = tmp_path / "result.json"
    write_json(analysis, out)  # the file exactly as `advisor analyze --json` writes it
    written = out.read_text(encoding="utf-8")
    data = json.loads(written)
    assert render(data) == written  # so normalising the parsed file loses no byte of it
    assert data["trace"]["path"] == str(ROOT / key)
    got = render(normalise(data, key))
    want = golden_path(key).read_text(encoding="utf-8")
    assert got == want, f"{key}: the JSON result changed (see tests/golden/json_reports.py)"
