"""Discover rules through the ``advisor.rules`` entry-point group (flake8's plugin model).

Built-in rules are registered the same way as a team's own package would register theirs, so
there is one path for both. A plugin that fails to import is an error that names it, never a
silently missing rule.

One group holds rules of both scopes (`advisor.engine.rule.Scope`): a rule's class says whether
it reads one rank's graph or the whole job (``RuleSpec.scope``), so the group need not. Job rules
once had a group of their own, ``advisor.job_rules`` (`LEGACY_JOB_GROUP`); a plugin still
registered there is loaded as before, with a `PluginDeprecationWarning` that says where to move
it, so a team's package keeps working across the upgrade.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

from advisor import plugins
from advisor.engine.rule import Rule, RuleSpec, Scope, is_base
from advisor.errors import AdvisorError
from advisor.plugins import EntryPoint, entry_points  # not importlib.metadata's: start-up cost

GROUP = "advisor.rules"
LEGACY_JOB_GROUP = "advisor.job_rules"
"""The job rules' former group: read for plugins not yet moved, with a deprecation warning."""


class PluginError(AdvisorError):
    """A rule plugin could not be loaded."""


class PluginDeprecationWarning(FutureWarning):
    """A plugin registers the old way. A `FutureWarning`, not a `DeprecationWarning`: Python
    hides the latter outside ``__main__``, and the person who must hear it runs the ``advisor``
    command, not the plugin's code."""


def _entry_points() -> list[tuple[EntryPoint, bool]]:
    """Every rule entry point with whether it came from the legacy job group, by name; a name
    in both groups is the new group's (the plugin moved and left the old line behind)."""
    found = {ep.name: (ep, False) for ep in entry_points(group=GROUP)}
    for ep in entry_points(group=LEGACY_JOB_GROUP):
        found.setdefault(ep.name, (ep, True))
    return [found[k] for k in sorted(found)]


def _load(ep: EntryPoint, legacy: bool) -> type[RuleSpec]:
    try:
        cls = ep.load()
    except Exception as e:  # a broken plugin must name itself
        raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) failed to load: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, RuleSpec)) or is_base(cls):
        raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) is not an advisor rule class")
    if cls.name != ep.name:
        raise PluginError(f"rule plugin {ep.name!r} names its class {cls.name!r}: they must match")
    if cls.scope is Scope.RANK and not issubclass(cls, Rule):
        raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) is a rank rule that is not an "
                          "advisor Rule (advisor.engine.rule.Rule)")
    if legacy:
        if cls.scope is not Scope.JOB:
            raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) is registered under "
                              f"{LEGACY_JOB_GROUP!r} but is not a job rule")
        warnings.warn(f"rule plugin {ep.name!r} ({ep.value}) is registered under the entry-point "
                      f"group {LEGACY_JOB_GROUP!r}, which is deprecated: register it under "
                      f"{GROUP!r} (a rule's scope comes from its class)",
                      PluginDeprecationWarning, stacklevel=2)
    return cls


@lru_cache(maxsize=1)
def _load_all() -> tuple[type[RuleSpec], ...]:
    """Every registered rule of both scopes, by name, loaded once per process (a plugin's
    deprecation warning is said once, not at every lookup)."""
    rules: dict[str, type[RuleSpec]] = {}
    codes: dict[str, str] = {}
    for ep, legacy in _entry_points():
        cls = _load(ep, legacy)
        if cls.code in codes and codes[cls.code] != cls.name:
            raise PluginError(f"rules {codes[cls.code]!r} and {cls.name!r} share code {cls.code}")
        codes[cls.code] = cls.name
        rules[cls.name] = cls
    return tuple(rules[k] for k in sorted(rules))


def load_specs(scope: Scope) -> list[type[RuleSpec]]:
    """The registered rules of one scope, in name order."""
    return [r for r in _load_all() if r.scope is scope]


def load_rules() -> list[type[Rule]]:
    """The rank rules (`Scope.RANK`), in name order; job rules: `advisor.job.rule.load_job_rules`."""
    rules = [r for r in load_specs(Scope.RANK) if issubclass(r, Rule)]
    if not rules:
        raise PluginError("no rules are registered: is advisor installed (pip install -e .)?")
    return rules


def clear_cache() -> None:
    """Forget the loaded plugins (a test that installs or removes one)."""
    _load_all.cache_clear()
    plugins.clear_cache()


def select(rules: list[type[Rule]], names: list[str] | None) -> list[type[Rule]]:
    """Rules picked by name, code or alias; all when ``names`` is empty."""
    if not names:
        return rules
    by_key: dict[str, type[Rule]] = {}
    for r in rules:
        for key in (r.name, r.code, *r.aliases):
            by_key[key] = r
    unknown = [n for n in names if n not in by_key]
    if unknown:
        raise AdvisorError(f"unknown rule(s): {', '.join(unknown)} (see `advisor rules`)")
    return [by_key[n] for n in names]
