"""Settled step time of a Lightning run, from its own progress bar (issue 36's hand timing).

    python3 benchmarks/public/lightning_steps.py LOG [LOG...] [--from-step 10]

How the bar is read: `tests.public_logs.settled` (shared with the tests that check advisor's
figures against these logs). Prints one line per log; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.public_logs import settled  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--from-step", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = {}
    for path in args.logs:
        with open(path, errors="replace") as f:
            r = settled(f.read(), args.from_step)
        rows[path] = r
        per = ", ".join(f"e{s['epoch']} {s['ms']:.2f}" for s in r["epochs"])
        ms = f"{r['step_ms']:.2f} ms" if r["step_ms"] else "no settled steps"
        print(f"{path}: {ms} over {r['steps']} steps ({per})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not any(r["step_ms"] for r in rows.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
