"""CI policy: under CI (CI=true, as GitHub Actions and our .ci/run set it) a skip is a failure.

A test that skips in CI checks nothing, and nobody reads the ``-ra`` summary of a green run. Under
CI every skip fails its test (or its module, for a skip at import), naming the reason; a strict
xfail (a measured, documented miss) is not a skip and stays allowed. A plugin module of its own so
that a test can load it into a separate pytest run (``-p tests.ci_policy``).
"""

from __future__ import annotations

import os

import pytest


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a skip in CI tests nothing): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A module skipped at import (``pytest.importorskip`` at the top) fails the same way."""
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a skip in CI tests nothing): {reason}"
