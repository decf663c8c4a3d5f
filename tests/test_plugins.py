"""`advisor.plugins.entry_points` finds what `importlib.metadata.entry_points` finds, without its
import and its parse of every distribution (start-up of `advisor analyze`, issue #39)."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from advisor import plugins
from advisor.engine.registry import GROUP, LEGACY_JOB_GROUP
from advisor.ingest.base import GROUP as FORMATS

GROUPS = (GROUP, LEGACY_JOB_GROUP, FORMATS, "advisor.team")


def _theirs(group: str) -> list[tuple[str, str, str]]:
    return sorted((ep.name, ep.value, ep.group)
                  for ep in importlib.metadata.entry_points(group=group))


def _ours(group: str) -> list[tuple[str, str, str]]:
    return sorted((ep.name, ep.value, ep.group) for ep in plugins.entry_points(group))


@pytest.fixture
def fresh():
    plugins.clear_cache()
    yield
    plugins.clear_cache()


def test_the_installed_groups_are_importlib_metadatas(fresh):
    for group in GROUPS:
        assert _ours(group) == _theirs(group)
    assert {ep.name for ep in plugins.entry_points(GROUP)} >= {"host-sync", "straggler-rank"}


def _dist(site: Path, folder: str, text: str) -> None:
    (site / folder).mkdir()
    (site / folder / "entry_points.txt").write_text(textwrap.dedent(text), encoding="utf-8")


def test_a_distribution_earlier_on_the_path_hides_a_later_one_of_the_same_name(
        tmp_path, monkeypatch, fresh):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    _dist(first, "Team_Rules-2.0.dist-info", """
        # a comment
        [console_scripts]
        team = team_rules:main

        [advisor.team]
        new-rule = team_rules.new:Rule
        [advisor.formats]
        team-format=team_rules.fmt:Source
        """)
    _dist(second, "team.rules-1.0.dist-info", """
        [advisor.team]
        old-rule = team_rules.old:Rule
        """)
    _dist(second, "other_rules-1.0.egg-info", """
        [advisor.team]
        other = other_rules:Rule [extra]
        """)
    (second / "no_entry_points-1.0.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    for group in GROUPS:
        assert _ours(group) == _theirs(group)
    assert _ours("advisor.team") == [
        ("new-rule", "team_rules.new:Rule", "advisor.team"),
        ("other", "other_rules:Rule [extra]", "advisor.team")]


def test_a_zip_on_the_path_is_left_to_importlib_metadata(tmp_path, monkeypatch, fresh):
    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip
    monkeypatch.setattr(sys, "path", [*sys.path, str(archive)])
    assert not plugins._plain_path()
    for group in GROUPS:
        assert _ours(group) == _theirs(group)


def test_an_entry_point_loads_the_attribute_it_names():
    ep = plugins.EntryPoint("host-sync", "advisor.rules.host_sync:HostSync", GROUP)
    from advisor.rules.host_sync import HostSync

    assert ep.load() is HostSync
    assert plugins.EntryPoint("x", "advisor.plugins", "g").load() is plugins
    with pytest.raises(ModuleNotFoundError):
        plugins.EntryPoint("x", "no_such_module_here:X", "g").load()
