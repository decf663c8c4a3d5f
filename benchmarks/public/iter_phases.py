"""Mean iteration of nanoGPT logs in three spans: before advisor's window (iterations 5-15), just
after it (30-99) and later (100-499), from the script's own ``iter N: ... time X ms`` lines.

    python3 benchmarks/public/iter_phases.py LOG [LOG...]
"""

from __future__ import annotations

import re
import statistics
import sys

LINE = re.compile(r"iter (\d+): .*?time ([\d.]+)ms")
SPANS = ((5, 16), (30, 100), (100, 500))


def spans(text: str) -> list[float | None]:
    it = {int(i): float(ms) for i, ms in LINE.findall(text)}
    out = []
    for a, b in SPANS:
        v = [it[i] for i in range(a, b) if i in it]
        out.append(statistics.fmean(v) if v else None)
    return out


def main() -> None:
    print(f"{'run':<28} {'5-15':>8} {'30-99':>8} {'100-499':>8}  (ms per iteration)")
    for path in sys.argv[1:]:
        if not path.endswith(".log"):
            continue
        with open(path, errors="replace") as f:
            vals = spans(f.read())
        cells = " ".join(f"{v:8.3f}" if v is not None else f"{'-':>8}" for v in vals)
        print(f"{path.rsplit('/', 1)[-1]:<28} {cells}")


if __name__ == "__main__":
    main()
