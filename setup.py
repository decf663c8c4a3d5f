"""Package discovery for the layout that tells the architecture.

`rules/` (the rule plugins) and `reports/templates/` (the HTML report's templates) live at the
top of the repository beside `advisor/`, yet install inside the `advisor` package as
`advisor.rules` and `advisor.report.templates`. pyproject.toml's `packages.find` takes one root
only, so this file finds the packages under each root: a new subpackage anywhere is installed
without being listed (a hand-written list once left `advisor.ingest.kineto` out of the wheel).
Everything else about the build is in pyproject.toml.
"""

from setuptools import find_namespace_packages, find_packages, setup

MOUNTED = {"advisor.rules": "rules", "advisor.report.templates": "reports/templates"}
"""Packages installed inside `advisor` from folders at the top of the repository."""


def discovered() -> list[str]:
    own = find_packages(include=["advisor", "advisor.*"])
    for name, folder in MOUNTED.items():
        own.append(name)
        own += [f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])]
    return own


setup(packages=discovered(), package_dir={"advisor": "advisor", **MOUNTED})
