"""nsys vs torch.profiler: the findings of every pair of captures of one job in fixtures/.

    python benchmarks/nsys_parity.py              # one line per pair, as they are analysed
    python benchmarks/nsys_parity.py --markdown   # the table of docs/nsys-parity.md

Which folders are pairs, what "agree" means and the documented causes of each difference live
in ``tests/nsys_parity.py`` (shared with ``tests/test_nsys_parity.py``, which checks each pair).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import nsys_parity as P


def _fmt(side: P.Side) -> str:
    if not side.raised:
        return "none"
    return ", ".join(f"{rule} {x:.2f}x" for rule, x in sorted(side.raised.items(),
                                                               key=lambda kv: -kv[1]))


def _verdict(c: P.Comparison) -> str:
    if c.agree:
        return "agree" if c.label not in P.DOCUMENTED else "agree (**entry to remove**)"
    if c.label in P.DOCUMENTED:
        return "differ: " + "; ".join(c.differences()) + ". *Cause:* " + P.DOCUMENTED[c.label]
    return "**differ, undocumented**: " + "; ".join(c.differences())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print docs/nsys-parity.md's table")
    args = parser.parse_args()
    rows = []
    for label in P.pairs():
        c = P.compare(label)
        rows.append(c)
        if not args.markdown:
            print(f"{label}: nsys {_fmt(c.nsys)} | torch.profiler {_fmt(c.kineto)} | "
                  f"{_verdict(c)}", flush=True)
    if not args.markdown:
        return
    agree = sum(1 for c in rows if c.agree)
    print(f"{agree} of {len(rows)} pairs agree (same rules raised, each estimate within "
          f"{P.AGREE_FACTOR:g}x of the other's); every other pair's difference has its cause.\n")
    print("| pair | nsys | torch.profiler | verdict |")
    print("|---|---|---|---|")
    for c in rows:
        print(f"| `{c.label}` | {_fmt(c.nsys)} | {_fmt(c.kineto)} | {_verdict(c)} |")


if __name__ == "__main__":
    main()
