"""Trace formats come from the ``advisor.formats`` entry points, none hand-listed in code."""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import EntryPoint

import pytest

import advisor.ingest
from advisor.ingest import base
from advisor.ingest.base import FormatPluginError, TraceSource, trace_sources


def _readers_in_the_package() -> set[type[TraceSource]]:
    """Every TraceSource subclass defined under advisor.ingest (imports each module)."""
    found: set[type[TraceSource]] = set()
    for info in pkgutil.walk_packages(advisor.ingest.__path__, "advisor.ingest."):
        mod = importlib.import_module(info.name)
        found |= {v for v in vars(mod).values() if isinstance(v, type)
                  and issubclass(v, TraceSource) and v is not TraceSource
                  and v.__module__ == info.name}
    return found


def test_every_reader_of_the_package_is_a_registered_format():
    assert set(trace_sources()) == _readers_in_the_package()
    assert [s.format for s in trace_sources()] == sorted(s.format for s in trace_sources())


def _with(monkeypatch, *eps: EntryPoint) -> None:
    trace_sources.cache_clear()
    monkeypatch.setattr(base, "entry_points", lambda group: list(eps))


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    trace_sources.cache_clear()


def test_a_plugin_that_fails_to_import_names_itself(monkeypatch):
    _with(monkeypatch, EntryPoint("broken", "no_such_module_here:Reader", base.GROUP))
    with pytest.raises(FormatPluginError, match=r"'broken'.*failed to load"):
        trace_sources()


def test_a_plugin_whose_format_differs_from_its_name_is_refused(monkeypatch):
    _with(monkeypatch, EntryPoint("chrome", "advisor.ingest.kineto.loader:ChromeTraceSource",
                                  base.GROUP))
    with pytest.raises(FormatPluginError, match="names its format 'kineto-json'"):
        trace_sources()


def test_a_plugin_that_is_not_a_trace_source_is_refused(monkeypatch):
    _with(monkeypatch, EntryPoint("kineto-json", "advisor.ingest.base:LoadOptions", base.GROUP))
    with pytest.raises(FormatPluginError, match="not an advisor TraceSource"):
        trace_sources()
