"""The corpus snapshot's data: every trace in ../shared/traces and what advisor makes of it.
tests/corpus/test_corpus.py compares it with the reviewed snapshot and
benchmarks/corpus_snapshot.py writes a candidate from it; here because tests never import from
benchmarks/ (issue 31 item 5)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"
REVIEWED = ROOT / "tests" / "corpus" / "expected.json"


def traces() -> list[str]:
    return sorted(str(p.relative_to(SHARED)) for p in SHARED.rglob("*")
                  if p.name.endswith((".sqlite", ".json.gz"))) if SHARED.exists() else []


def summary(rel: str) -> dict:
    from advisor.analysis import analyze
    from advisor.report.json_report import to_dict

    d = to_dict(analyze(SHARED / rel))
    det = d["steps"]["detection"]
    return {
        "steps": d["steps"]["count"],
        # Which steps, how they were found, and whether they carry estimates.
        "detection": {"method": det["method"], "pid": det["pid"], "first": det["first"],
                      "last": det["last"], "confidence": det["confidence"],
                      "estimates": d["estimate_withheld"] is None},
        "findings": {f["rule"]: round(f["estimated_speedup"], 3) for f in d["findings"]},
    }
