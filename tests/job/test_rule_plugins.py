"""Rules of both scopes register in one entry-point group, ``advisor.rules``; the job rules'
former group, ``advisor.job_rules``, still works for a plugin not yet moved, with a warning.

The plugins here are real modules on ``sys.path`` loaded through real `EntryPoint`s; only the
list of entry points the registry reads is replaced (as tests/ingest/test_format_registry.py
does for trace formats), so an installed distribution is not needed to register one.
"""

from __future__ import annotations

import sys
import textwrap
import warnings
from importlib.metadata import EntryPoint, distribution

import pytest

from advisor.engine import registry
from advisor.engine.job_model import build_job
from advisor.engine.registry import GROUP, LEGACY_JOB_GROUP, PluginDeprecationWarning, PluginError
from advisor.engine.rule import Scope
from advisor.job.rule import load_job_rules, run_job_rule_set

BUILT_IN_JOB_RULES = {"exposed-communication", "straggler-rank", "load-imbalance"}

# A job rule written against the contract before `ctx.finding`: check(job), self.estimate and
# self.finding, as a team's package registered it under the old group.
LEGACY = '''
from advisor.engine.rule import FixVariant, JobRequirement
from advisor.job.rule import JobRule

DOC = """Slow job.

What it detects
---------------
x

Why it is slow
--------------
x

Evidence
--------
x

Example
-------
x

Use instead
-----------
x

Speedup model
-------------
x

Known false positives
---------------------
x

References
----------
x
"""


class SlowJob(JobRule):
    __doc__ = DOC
    code = "TEAM001"
    name = "team-slow-job"
    requires = (JobRequirement.STEPS,)
    mechanisms = {"slow": "every rank is slow"}
    fixes = (FixVariant("slow", "Make every rank faster", "pass"),)
    model = "a tenth of every rank's own work removed"

    def check(self, job):
        def tenth(r, st):
            return 0.1 * st.rank_busy_ns[r]

        est = self.estimate(job, "slow", tenth, tenth, tenth)
        yield self.finding(job, "slow", "every rank is slow", est, {"ranks": len(job.rank_ids)})
'''

RANK = '''
from advisor.rules.host_sync import HostSync


class TeamSync(HostSync):
    __doc__ = HostSync.__doc__
    code = "TEAM002"
    name = "team-sync"
'''


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """Write a module on sys.path; forget the loaded plugins before and after."""
    def write(name: str, text: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    registry.clear_cache()
    yield write
    registry.clear_cache()
    for name in [m for m in sys.modules if m.startswith("team_")]:
        del sys.modules[name]


def _groups(monkeypatch, extra: dict[str, list[EntryPoint]]) -> None:
    """The installed entry points of each group, plus ``extra``'s."""
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [*real(group=group), *extra.get(group, [])])


def test_the_distribution_registers_both_scopes_in_one_group():
    eps = distribution("h100-advisor").entry_points
    assert not [ep for ep in eps if ep.group == LEGACY_JOB_GROUP]
    names = {ep.name for ep in eps if ep.group == GROUP}
    assert names >= BUILT_IN_JOB_RULES
    assert {r.name for r in load_job_rules()} == BUILT_IN_JOB_RULES
    assert all(r.scope is Scope.JOB for r in load_job_rules())
    assert all(r.scope is Scope.RANK for r in registry.load_rules())
    assert not {r.name for r in registry.load_rules()} & BUILT_IN_JOB_RULES


def test_a_job_rule_under_the_old_group_runs_with_a_deprecation_warning(
        plugin_module, monkeypatch, synth_summaries):
    mod = plugin_module("team_legacy", LEGACY)
    _groups(monkeypatch, {LEGACY_JOB_GROUP: [
        EntryPoint("team-slow-job", f"{mod}:SlowJob", LEGACY_JOB_GROUP)]})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rules = load_job_rules()
        job = build_job(synth_summaries)
        results = run_job_rule_set(job)
    assert "team-slow-job" in {r.name for r in rules}
    told = [str(w.message) for w in said if w.category is PluginDeprecationWarning]
    assert any("'advisor.job_rules', which is deprecated" in t for t in told), told
    assert any("check(job) is deprecated" in t for t in told), told
    (f,) = [f for f in (*results.findings, *results.below_threshold) if f.rule == "team-slow-job"]
    # its estimate is the job what-if's, reached through the context's estimate API
    assert 1.0 < f.estimate.speedup <= 1 / 0.9 + 1e-9
    assert f.fix.title == "Make every rank faster" and f.ranks == tuple(job.rank_ids)


def test_a_plugin_moved_to_the_new_group_is_not_warned_about(plugin_module, monkeypatch):
    mod = plugin_module("team_moved", LEGACY)
    ep = f"{mod}:SlowJob"
    _groups(monkeypatch, {GROUP: [EntryPoint("team-slow-job", ep, GROUP)],
                          LEGACY_JOB_GROUP: [EntryPoint("team-slow-job", ep, LEGACY_JOB_GROUP)]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginDeprecationWarning)
        assert "team-slow-job" in {r.name for r in load_job_rules()}


def test_a_rank_rule_under_the_old_job_group_is_refused(plugin_module, monkeypatch):
    mod = plugin_module("team_rank", RANK)
    _groups(monkeypatch, {LEGACY_JOB_GROUP: [
        EntryPoint("team-sync", f"{mod}:TeamSync", LEGACY_JOB_GROUP)]})
    with pytest.raises(PluginError, match="not a job rule"):
        registry.load_rules()


def test_two_rules_of_different_scopes_may_not_share_a_code(plugin_module, monkeypatch):
    mod = plugin_module("team_clash", LEGACY.replace('"TEAM001"', '"HOST001"'))
    _groups(monkeypatch, {GROUP: [EntryPoint("team-slow-job", f"{mod}:SlowJob", GROUP)]})
    with pytest.raises(PluginError, match="share code HOST001"):
        load_job_rules()
