"""Imports flow one way: from the entry points down to the graph, never back up.

The layers, top to bottom (docs/architecture.md says what each holds). A module may import its
own layer and any layer below it; an import of a higher layer is an arrow the wrong way, and fails
here unless it is one of the documented entry points in `ALLOWED`. Every import counts, the lazy
ones inside functions too: a lazy import still makes the lower module depend on the higher one.

The import graph is read with `ast` from the source (grimp, the library import-linter uses, is
not a dependency of the project; the graph of one package's absolute imports is a few lines).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

LAYERS: tuple[tuple[str, ...], ...] = (
    ("advisor.cli", "advisor.commands", "advisor.capture.__main__"),  # entry points
    ("advisor.rules.job",),  # job-rule plugins: over the job model
    ("advisor.capture", "advisor.job"),  # `advisor profile`; a distributed job
    ("advisor.gate",),  # `advisor gate`: reads the JSON result
    ("advisor.report",),  # the report model and its views
    ("advisor.analysis",),  # the library entry point: a trace in, an Analysis out
    ("advisor.config",),  # [tool.advisor]: picks and configures rules
    ("advisor.rules",),  # rule plugins: over the engine's contract
    ("advisor.engine",),  # the rule contract, runner, what-if replay
    ("advisor.ingest",),  # trace formats -> OpGraph
    ("advisor.graph",),  # the op graph, steps, summaries
    ("advisor", "advisor.errors", "advisor.safe_text", "advisor.output_paths"),  # shared basics
)

ALLOWED: set[tuple[str, str]] = set()
"""(importer, imported) pairs that go up on purpose, each with its reason."""


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "rules":  # installed as advisor.rules (pyproject.toml's package-dir)
        parts.insert(0, "advisor")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """Index in `LAYERS` of the longest prefix that names the module's package."""
    best, index = -1, None
    for i, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, index = len(name), i
    assert index is not None, f"{module} is in no layer: add it to LAYERS"
    return index


def imports(path: Path, runtime_only: bool = False) -> set[str]:
    """Absolute advisor modules this file imports (``from advisor.x import y`` counts as
    ``advisor.x.y`` when y is a module, else ``advisor.x``); with ``runtime_only``, not those
    under ``if TYPE_CHECKING:`` (annotations only, never executed: `tests/test_import_cycles`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree)
                   if runtime_only and isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test)
                   for stmt in node.body for n in ast.walk(stmt)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "advisor")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "advisor":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if _is_module(full) else node.module)
    return out


def _is_module(name: str) -> bool:
    parts = name.split(".")[1:]
    if parts and parts[0] == "rules":
        base = ROOT.joinpath("rules", *parts[1:])
    else:
        base = ROOT.joinpath("advisor", *parts)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def sources() -> list[Path]:
    return sorted([*ROOT.joinpath("advisor").rglob("*.py"), *ROOT.joinpath("rules").rglob("*.py")])


def upward_imports() -> list[tuple[str, str]]:
    found = []
    for path in sources():
        importer = module_of(path)
        for imported in sorted(imports(path)):
            if layer_of(imported) < layer_of(importer) and (importer, imported) not in ALLOWED:
                found.append((importer, imported))
    return found


def test_no_import_climbs_to_a_higher_layer():
    assert upward_imports() == []


def test_every_allowed_exception_is_still_needed():
    """An exception nobody takes any more is removed, so the list only ever shrinks."""
    used = {(module_of(p), m) for p in sources() for m in imports(p)}
    assert used >= ALLOWED, ALLOWED - used


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check itself works: the graph layer importing the report is caught."""
    assert layer_of("advisor.graph.step_metrics") > layer_of("advisor.report.json_report")
    fake = tmp_path / "m.py"
    fake.write_text("def f():\n    from advisor.report.model import Report\n", encoding="utf-8")
    assert imports(fake) == {"advisor.report.model"}
