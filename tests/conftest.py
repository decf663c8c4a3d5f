"""Shared fixtures: where the real traces live, and gunzipped copies of our H100 captures."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
SCENARIOS = ROOT / "fixtures" / "scenarios"


def shared(rel: str) -> Path:
    p = SHARED_TRACES / rel
    if not p.exists():
        pytest.skip(f"shared trace {rel} is not present (../shared/traces is beside the repo in CI)")
    return p


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory):
    """Gunzip a fixture (``*.sqlite.gz``) once per session; returns the path of the copy."""
    cache: dict[Path, Path] = {}
    root = tmp_path_factory.mktemp("unpacked")

    def get(path: Path) -> Path:
        if path.suffix != ".gz" or path.name.endswith(".json.gz"):
            return path
        if path not in cache:
            out = root / f"{len(cache)}_{path.stem}"
            with gzip.open(path, "rb") as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            cache[path] = out
        return cache[path]

    return get

