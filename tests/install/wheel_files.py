"""What a built wheel must hold: every module and data file of the source tree, where the
install puts it (`rules/` as `advisor/rules/`, `reports/templates/` as
`advisor/report/templates/`, as setup.py mounts them).

Used by tests/install/test_wheel_contents.py and by `.ci/install_check.sh` on the wheel CI built,
so the two compare the same way.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOUNTS = {"advisor": "advisor", "rules": "advisor/rules", "reports/templates": "advisor/report/templates"}
"""Source folder -> where its files sit inside the installed package."""


def expected_files(root: Path = ROOT) -> set[str]:
    out: set[str] = set()
    for folder, installed in MOUNTS.items():
        base = root / folder
        for path in base.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(f"{installed}/{path.relative_to(base).as_posix()}")
    return out


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n for n in z.namelist() if ".dist-info/" not in n and not n.endswith("/")}


def compare(wheel: Path, root: Path = ROOT) -> tuple[set[str], set[str]]:
    """(missing from the wheel, in the wheel but not in the source tree)."""
    want, have = expected_files(root), wheel_files(wheel)
    return want - have, have - want


def main(argv: list[str]) -> int:
    missing, extra = compare(Path(argv[1]), Path(argv[2]) if len(argv) > 2 else ROOT)
    for name in sorted(missing):
        print(f"missing from the wheel: {name}", file=sys.stderr)
    for name in sorted(extra):
        print(f"in the wheel, not in the source tree: {name}", file=sys.stderr)
    return 1 if missing or extra else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
