"""The wheel users install holds every module and data file of the source tree.

A hand-written package list once left `advisor.ingest.kineto` and `advisor.ingest.nsys` out of
the wheel; the editable install the suite used hid it, and the README's first command failed on
a clean machine. This builds the wheel from a copy of the tree, as `pip install .` does, and
compares it file by file with the tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.install.wheel_files import ROOT, compare, expected_files

BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "advisor", "rules", "reports")


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(p, src / name)
    out = tmp / "dist"
    # with build isolation, as `pip install .` builds (setuptools from the index, as pyproject
    # asks), whatever setuptools the test environment has
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(src)], check=True, timeout=600, stdout=subprocess.DEVNULL)
    (wheel,) = out.glob("h100_advisor-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(wheel):
    missing, extra = compare(wheel)
    assert not missing, f"left out of the wheel: {sorted(missing)}"
    assert not extra, f"in the wheel but not in the tree: {sorted(extra)}"
    # the ones whose absence broke the first command, and the data the reports read
    have = expected_files()
    for needed in ("advisor/ingest/kineto/loader.py", "advisor/ingest/nsys/loader.py",
                   "advisor/rules/host_sync.py", "advisor/report/templates/report.html.j2",
                   "advisor/examples/h100-host-sync.sqlite.gz", "advisor/report/schema.json"):
        assert needed in have


def test_the_comparison_notices_a_missing_subpackage(wheel, tmp_path):
    """The check itself can fail: a wheel without one subpackage is reported."""
    import zipfile

    cut = tmp_path / "cut.whl"
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(cut, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("advisor/ingest/kineto/"):
                dst.writestr(item, src.read(item))
    missing, _ = compare(cut)
    assert "advisor/ingest/kineto/loader.py" in missing


def test_the_wheel_registers_rules_of_both_scopes_in_one_group(wheel):
    """One entry-point group for rank and job rules (`advisor.engine.registry`): the wheel's
    metadata names every rule of both scopes under ``advisor.rules`` and has no
    ``advisor.job_rules`` section (the deprecated group is for third-party plugins only)."""
    import configparser
    import zipfile

    from advisor.engine.registry import GROUP, LEGACY_JOB_GROUP
    from advisor.engine.rule import Scope

    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = z.read(name).decode("utf-8")
    eps = configparser.ConfigParser(delimiters=("=",))
    eps.optionxform = str  # type: ignore[assignment,method-assign]  # names are case-sensitive
    eps.read_string(text)
    assert LEGACY_JOB_GROUP not in eps.sections()
    registered = dict(eps[GROUP])
    for scope, folder in ((Scope.RANK, ROOT / "rules"), (Scope.JOB, ROOT / "rules" / "job")):
        modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        targets = {v.split(":")[0].rsplit(".", 1)[1] for v in registered.values()
                   if v.startswith(f"advisor.rules.{'job.' if scope is Scope.JOB else ''}")
                   and v.count(".") == (3 if scope is Scope.JOB else 2)}
        assert targets == modules, f"{scope.value} rules registered {targets} against {modules}"
