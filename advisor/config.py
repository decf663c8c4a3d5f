"""Which rules run and with which options: `[tool.advisor]` in pyproject.toml, then the CLI.

Ruff's model: the closest ``pyproject.toml`` with a ``[tool.advisor]`` table, found from the
working directory upward, holds the project's settings; command-line flags override it, and
``--isolated`` ignores it. A team commits its choices next to its code instead of repeating
flags in every CI job::

    [tool.advisor]
    ignore = ["fp8-candidate"]            # rules by name or code; `select` keeps only those named

    [tool.advisor.options.loader-jitter]  # a rule's options (`advisor rules NAME` lists them)
    outlier-mads = 6.0

Every name and key is checked against the installed rules: a typo is a one-line error (exit 2),
never a setting silently ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.engine.rule import Rule, RuleSpec
from advisor.errors import AdvisorError

TABLE = "advisor"
KEYS = ("select", "ignore", "options")


class ConfigError(AdvisorError):
    """A setting in pyproject.toml or on the command line that advisor cannot apply."""


@dataclass(frozen=True)
class RuleSettings:
    """Rules picked (``select``: only these; ``ignore``: all but these) and rule options, by the
    names the user wrote: `resolve` checks them against the installed rules."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    options: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    source: Path | None = None  # the pyproject.toml they came from, if any

    def override(self, select: Sequence[str] = (), ignore: Sequence[str] = (),
                 options: Mapping[str, Mapping[str, object]] | None = None) -> RuleSettings:
        """The command line on top of the file: ``--select`` replaces the file's selection,
        ``--ignore`` adds to its ignores, an option set on the command line wins per key."""
        merged = {rule: dict(values) for rule, values in self.options.items()}
        for rule, values in (options or {}).items():
            merged.setdefault(rule, {}).update(values)
        return RuleSettings(tuple(select) or self.select, self.ignore + tuple(ignore), merged,
                            self.source)


def find_pyproject(start: Path) -> Path | None:
    """The closest pyproject.toml with a ``[tool.advisor]`` table at or above ``start``."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and TABLE in _read(candidate).get("tool", {}):
            return candidate
    return None


def _read(path: Path) -> dict:
    # imported here: a run with no pyproject.toml above it never parses TOML (start-up of
    # `advisor analyze`, issue #39)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the same parser, as a package before 3.11
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read it as TOML: {e}") from e


def load_settings(start: Path | None = None) -> RuleSettings:
    """Settings of the project containing ``start`` (the working directory by default)."""
    path = find_pyproject((start or Path.cwd()).resolve())
    if path is None:
        return RuleSettings()
    table = _read(path)["tool"][TABLE]
    where = f"{path}: [tool.{TABLE}]"
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(KEYS)})")
    names = {}
    for key in ("select", "ignore"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key} must be a list of rule names or codes")
        names[key] = tuple(value)
    options = table.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ConfigError(f"{where}: options must hold one table per rule "
                          f"([tool.{TABLE}.options.RULE-NAME])")
    return RuleSettings(names["select"], names["ignore"], options, path)


def parse_assignment(text: str) -> tuple[str, str, str]:
    """``RULE.KEY=VALUE`` (the CLI's ``--rule-option``) -> (rule, key, value as written)."""
    target, sep, value = text.partition("=")
    rule, dot, key = target.strip().partition(".")
    if not (sep and dot and rule and key and value.strip()):
        raise ConfigError(f"--rule-option {text!r} is not RULE.KEY=VALUE "
                          "(e.g. loader-jitter.outlier-mads=6)")
    return rule, key.strip(), value.strip()


def split_names(values: Sequence[str]) -> tuple[str, ...]:
    """``--select a,b --select c`` -> (a, b, c): ruff's comma-separated lists."""
    return tuple(n.strip() for v in values for n in v.split(",") if n.strip())


def settings_from_flags(select: Sequence[str], ignore: Sequence[str],
                        rule_option: Sequence[str], isolated: bool) -> RuleSettings:
    """[tool.advisor] of the closest pyproject.toml (unless ``isolated``), then the command
    line's ``--select``/``--ignore``/``--rule-option`` (`advisor analyze` and `advisor profile`)."""
    base = RuleSettings() if isolated else load_settings()
    options: dict[str, dict[str, object]] = {}
    for text in rule_option:
        rule, key, value = parse_assignment(text)
        options.setdefault(rule, {})[key] = value
    return base.override(split_names(select), split_names(ignore), options)


def coerce_option(rule: type[RuleSpec], key: str, value: object, where: str) -> object:
    """One option's value as the rule declares it (numbers from the command line's text),
    checked against its range; rank and job rules alike."""
    default = rule.options[key].default
    if isinstance(value, str) and not isinstance(default, str):  # from the command line
        text = value.lower()
        if isinstance(default, bool):
            if text not in ("true", "false"):
                raise ConfigError(f"{where}: {rule.name}.{key} must be true or false, not {value!r}")
            return text == "true"
        try:
            value = int(value) if isinstance(default, int) else float(value)
        except ValueError:
            raise ConfigError(f"{where}: {rule.name}.{key} must be a number, not {value!r}") from None
    if isinstance(default, bool) != isinstance(value, bool) or not isinstance(
            value, (float, int) if isinstance(default, float) else type(default)):
        raise ConfigError(f"{where}: {rule.name}.{key} must be a {type(default).__name__} "
                          f"(its default is {default!r}), not {value!r}")
    value = float(value) if isinstance(default, float) else value
    problem = rule.options[key].problem(value)
    if problem:
        raise ConfigError(f"{where}: {rule.name}.{key} {problem}, not {value!r}")
    return value


def resolve(rules: list[type[Rule]], settings: RuleSettings
            ) -> tuple[list[type[Rule]], dict[str, dict[str, object]]]:
    """The rules to run and their options keyed by rule name, every name and key checked."""
    from advisor.engine.registry import select

    where = "rule options" + (f" ({settings.source} and the command line)" if settings.source
                              else "")
    chosen = select(rules, list(settings.select))
    ignored = {r.name for r in select(rules, list(settings.ignore))} if settings.ignore else set()
    options: dict[str, dict[str, object]] = {}
    for name, values in settings.options.items():
        (rule,) = select(rules, [name])
        for key, value in values.items():
            if key not in rule.options:
                known = ", ".join(rule.options) or "none"
                raise ConfigError(f"{where}: rule {rule.name} has no option {key!r} "
                                  f"(its options: {known})")
            options.setdefault(rule.name, {})[key] = coerce_option(rule, key, value, where)
    return [r for r in chosen if r.name not in ignored], options
