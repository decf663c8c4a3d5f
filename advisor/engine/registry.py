"""Discover rules through the ``advisor.rules`` entry-point group (flake8's plugin model).

Built-in rules are registered the same way as a team's own package would register theirs, so
there is one path for both. A plugin that fails to import is an error that names it, never a
silently missing rule.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from advisor.engine.rule import Rule
from advisor.errors import AdvisorError

GROUP = "advisor.rules"


class PluginError(AdvisorError):
    """A rule plugin could not be loaded."""


def load_rules() -> list[type[Rule]]:
    rules: dict[str, type[Rule]] = {}
    codes: dict[str, str] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            cls = ep.load()
        except Exception as e:  # a broken plugin must name itself
            raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) failed to load: {e}") from e
        if not (isinstance(cls, type) and issubclass(cls, Rule)):
            raise PluginError(f"rule plugin {ep.name!r} ({ep.value}) is not an advisor Rule class")
        if cls.name != ep.name:
            raise PluginError(f"rule plugin {ep.name!r} names its class {cls.name!r}: they must match")
        if cls.code in codes and codes[cls.code] != cls.name:
            raise PluginError(f"rules {codes[cls.code]!r} and {cls.name!r} share code {cls.code}")
        codes[cls.code] = cls.name
        rules[cls.name] = cls
    if not rules:
        raise PluginError("no rules are registered: is advisor installed (pip install -e .)?")
    return [rules[k] for k in sorted(rules)]


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
