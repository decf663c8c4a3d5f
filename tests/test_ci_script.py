"""CI runs what the README tells a developer to run, and the test extra covers every import.

`.ci/run` must run the README's test command word for word (so a green CI means the documented
command passes), and every third-party module a test imports must come from the `test` extra or
the runtime dependencies of pyproject.toml: under CI a test whose import is missing fails instead
of skipping, so a missing package would be found by CI only after a clean machine was set up.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, as a package before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    intro = readme.index("This is what CI runs (`.ci/run`)")
    block = readme[intro:].split("```bash\n", 1)[1].split("```", 1)[0]
    return block.strip()


def test_ci_runs_the_readme_test_command_word_for_word():
    command = _readme_test_command()
    lines = [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in lines
    assert lines[-1] == command  # last: the script's exit status is the tests' exit status


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    return {_normal(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in reqs}


def _imported_modules() -> set[str]:
    mods: set[str] = set()
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "docs" / "examples").rglob("*.py")]
    # the suite's own modules (the rule template's, say) and the benchmark scripts tests import
    # through sys.path (validate_rules, rule_matrix, corpus_snapshot...)
    local = ({p.stem for p in files} | {p.stem for p in (ROOT / "benchmarks").rglob("*.py")}
             | {"benchmarks"})
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                mods.add(str(node.args[0].value).split(".")[0])
    return mods - set(sys.stdlib_module_names) - local - {"advisor", "tests"}


def test_the_test_extra_names_every_package_a_test_imports():
    owners = packages_distributions()
    declared = _declared()
    missing = {}
    for mod in sorted(_imported_modules()):
        dists = {_normal(d) for d in owners.get(mod, [mod])}
        if not dists & declared:
            missing[mod] = sorted(dists)
    # markupsafe comes with jinja2 (a runtime dependency), which needs it to work at all
    missing.pop("markupsafe", None)
    assert not missing, f"add to the test extra of pyproject.toml: {missing}"
