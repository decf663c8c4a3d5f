"""The entry points of one group, as `importlib.metadata.entry_points(group=...)` finds them,
without importing `importlib.metadata` or parsing every installed distribution's metadata.

Rules (``advisor.rules``) and trace formats (``advisor.formats``) are plugins, built-in ones
included. `importlib.metadata` costs `advisor analyze` about 30 ms of CPU to import (it pulls in
the `email` package) and 15-20 ms per group to read every distribution's ``entry_points.txt``
(160 distributions here, three groups a run): a tenth of the start-up on a small trace
(issue #39). This reads the same files the same way, once per process, and only parses those
that mention an ``advisor.`` group.

Same result as `importlib.metadata` (``tests/test_plugins.py``): the distributions are the
``*.dist-info`` and ``*.egg-info`` folders of each directory on `sys.path`, in path order; a
distribution name seen earlier on the path hides later ones (its normalized name, taken from the
folder's name, as `importlib.metadata` does). Where the path holds anything this reader does not
handle (a zip or egg entry, or an import hook that finds distributions of its own), it asks
`importlib.metadata` instead.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from importlib import import_module

_MARK = "[advisor."
"""Every group advisor reads starts so; a distribution whose file lacks it is not parsed."""

_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
"""`importlib.metadata.EntryPoint.pattern`: ``module:attr.attr [extras]``."""


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: what `importlib.metadata.EntryPoint` offers the registries (``name``,
    ``value``, ``group``, `load`)."""

    name: str
    value: str
    group: str

    def load(self) -> object:
        """Import the module the value names and return its attribute, as
        `importlib.metadata.EntryPoint.load` does."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"{self.value!r} is not an entry point (module:attribute)")
        module = import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points registered under ``group`` by the installed distributions."""
    if not group.startswith("advisor.") or not _plain_path():
        return _from_importlib(group)
    return [ep for ep in _advisor_entry_points() if ep.group == group]


@functools.lru_cache(maxsize=1)
def _advisor_entry_points() -> tuple[EntryPoint, ...]:
    """Every ``advisor.*`` entry point, read once per process (`clear_cache` forgets it)."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        for info in _metadata_folders(entry or "."):
            name = _normalized(info)
            if name in seen:
                continue  # an earlier path entry's distribution of that name wins
            seen.add(name)
            found.extend(_read(os.path.join(entry or ".", info, "entry_points.txt")))
    return tuple(found)


def clear_cache() -> None:
    """Forget what was read (a test that installs or removes a plugin)."""
    _advisor_entry_points.cache_clear()


def _plain_path() -> bool:
    """Whether every distribution lies in a plain directory on `sys.path`: no zip or egg entry,
    and no import hook but `PathFinder` that finds distributions."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    return not any(entry.endswith(".egg") or os.path.isfile(entry) for entry in sys.path if entry)


def _metadata_folders(directory: str) -> list[str]:
    """The names of the distribution metadata folders in ``directory`` (none when it cannot be
    listed), in listing order, as `importlib.metadata` finds them."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [n for n in names if n.lower().endswith((".dist-info", ".egg-info"))]


def _normalized(folder: str) -> str:
    """A distribution's normalized name from its metadata folder's name (``Foo.Bar-1.0.dist-info``
    -> ``foo_bar``), as `importlib.metadata.PathDistribution._normalized_name`."""
    name = os.path.splitext(folder)[0].partition("-")[0]
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _read(path: str) -> list[EntryPoint]:
    """The ``advisor.*`` entry points of one ``entry_points.txt`` (``[group]`` headers,
    ``name = value`` lines, ``#`` comments, read as `importlib.metadata.Sectioned` reads them),
    none when it is missing."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    if _MARK not in text:
        return []
    found: list[EntryPoint] = []
    group = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
        elif group is not None and group.startswith("advisor."):
            name, _, value = line.partition("=")
            found.append(EntryPoint(name.strip(), value.strip(), group))
    return found


def _from_importlib(group: str) -> list[EntryPoint]:
    """`importlib.metadata`'s own answer, for a path this reader does not handle."""
    from importlib.metadata import entry_points as metadata_entry_points

    return [EntryPoint(ep.name, ep.value, ep.group) for ep in metadata_entry_points(group=group)]
