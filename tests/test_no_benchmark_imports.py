"""Tests never import from benchmarks/ (issue 31 item 5): what a test and a benchmark script both
need lives in a tests helper module (tests/validation_data.py, tests/rank_synth.py, ...), which
the scripts import. A test that put benchmarks/ on sys.path would check whatever that script
happens to compute, and a script edited for a one-off table would change a test's meaning."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SUBJECT_IS_THE_SCRIPT = {
    "tests/test_scenario_scripts.py": "its subject is the H100 scenario scripts themselves: it loads "
    "each as the harness does and runs its command line",
    "tests/test_real_script_ab.py": "its subject is benchmarks/real_script_ab.py itself: the A/B "
    "benchmark's log parsing and table on a real nanoGPT log",
    "tests/test_loader_slow_table.py": "its subject is benchmarks/public/loader_slow_table.py itself: "
    "the device script's table, parsed from archived H100 logs of ImageNet main.py",
}
BENCHMARK_MODULES = {p.stem for p in (ROOT / "benchmarks").rglob("*.py")}


def _offences(path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] in BENCHMARK_MODULES | {"benchmarks"}]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in BENCHMARK_MODULES | {"benchmarks"}:
                out.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "insert" \
                and "benchmarks" in ast.unparse(node):
            out.append(ast.unparse(node))
    return out


def test_no_test_module_imports_from_benchmarks():
    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in SUBJECT_IS_THE_SCRIPT:
            continue
        if offences := _offences(path):
            found[rel] = offences
    assert not found, found


def test_the_guard_sees_an_import_from_benchmarks(tmp_path):
    """The scan itself can fail: a module that does what the seven used to do is caught."""
    bad = tmp_path / "test_x.py"
    bad.write_text('import sys\nsys.path.insert(0, str(ROOT / "benchmarks"))\nimport validate_rules\n')
    assert len(_offences(bad)) == 2
