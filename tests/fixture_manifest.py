"""The test traces, as `fixtures/manifest.toml` lists them: what the suite sweeps.

Tests that run over "every trace" (the golden files, the step-basis test) take their traces from
here, never from a glob over ``fixtures/``: a capture added as evidence (`fixtures/archive/`)
would otherwise become three snapshot tests, and a trace added without a stated purpose would go
unnoticed. `tests/test_fixture_manifest.py` keeps the list and the tree in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
MANIFEST = FIXTURES / "manifest.toml"
FORMATS = ("nsys-sqlite", "kineto-json")
TRACE_SUFFIXES = (".sqlite", ".sqlite.gz", ".json.gz")
"""What a trace file under fixtures/ is named (a ``.json`` beside it is a result or a figure)."""


@dataclass(frozen=True)
class Fixture:
    path: str  # relative to fixtures/
    format: str
    purpose: str
    rules: tuple[str, ...]
    measured: tuple[str, ...]

    @property
    def key(self) -> str:
        """The path relative to the repository root, as the golden files key it."""
        return f"fixtures/{self.path}"


@cache
def fixtures() -> tuple[Fixture, ...]:
    """Every entry of the manifest, in its order."""
    with MANIFEST.open("rb") as f:
        data = tomllib.load(f)
    return tuple(Fixture(t["path"], t["format"], t["purpose"], tuple(t.get("rules", ())),
                         tuple(t.get("measured", ()))) for t in data["trace"])


def trace_keys() -> list[str]:
    """The test traces' paths relative to the repository root, sorted."""
    return sorted(f.key for f in fixtures())
