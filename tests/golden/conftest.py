"""One analysis per trace, shared by the golden tests of this folder.

Both golden files (`test_estimates.py`, `test_json_reports.py`) take a ``trace_key`` (a trace's
path relative to the repository root). Their tests are ordered by that key, so the tests of one
trace run one after the other (on the same xdist worker, mostly) and `analysis_of` analyses it
once for all of them while holding only the last two analyses in memory.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from tests.golden.estimates import analyse


@lru_cache(maxsize=2)
def analysis_of(key: str):
    """The trace's default analysis, or the `AdvisorError` it stopped with (cached)."""
    return analyse(key)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group the golden tests by trace, in the places they already hold in the run."""
    slots = [i for i, item in enumerate(items)
             if "trace_key" in getattr(getattr(item, "callspec", None), "params", {})]
    ordered = sorted((items[i] for i in slots), key=lambda item: item.callspec.params["trace_key"])
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item
