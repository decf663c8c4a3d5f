"""Print a capture's top GPU-idle lines as the console labels them (fixtures/source-lines/README.md).

    python benchmarks/source_lines/top_lines.py TRACE [--roots DIR ...] [-n 6]

``--roots``: where the script's files are read from for call lines (the scenario's file as it
was captured, a public script's checkout); without them only the lines the trace records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--roots", type=Path, nargs="*", default=[])
    ap.add_argument("-n", type=int, default=6)
    a = ap.parse_args()
    from dataclasses import replace

    from advisor.analysis import analyze
    from advisor.report import source_view

    an = replace(analyze(a.trace), source_roots=tuple(a.roots))
    src = an.source
    if src is None:
        print(source_view.SourceSection.of(an).note)
        return 0
    loc = source_view.Locator(source_view.SourceSection.of(an))
    total = sum(lc.ns_per_step for lc in src.idle) or 1.0
    for lc in src.idle[:a.n]:
        print(f"{lc.ns_per_step / 1e6:7.2f} ms {lc.ns_per_step / total:4.0%}  {loc.label(lc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
