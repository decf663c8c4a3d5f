"""One analysis per trace, shared by the golden tests of this folder.

Both golden files (`test_estimates.py`, `test_json_reports.py`) take a ``trace_key`` (a trace's
path relative to the repository root) and are marked ``grouped_by("trace_key")`` (see
`tests/conftest.py`): the tests of one trace run one after the other (on the same xdist worker,
mostly) and `analysis_of` analyses it once for all of them while holding only the last two
analyses in memory.
"""

from __future__ import annotations

from functools import lru_cache

from tests.golden.estimates import analyse


@lru_cache(maxsize=2)
def analysis_of(key: str):
    """The trace's default analysis, or the `AdvisorError` it stopped with (cached)."""
    return analyse(key)
