"""Write a candidate corpus snapshot for review: every rule over every trace in ../shared/traces.

The reviewed snapshot is tests/corpus/expected.json, and only a person changes it: this script
writes a *candidate* beside it (expected.new.json by default, never expected.json itself) and
prints what moved. Read the differences trace by trace, then replace the snapshot by hand
(``mv tests/corpus/expected.new.json tests/corpus/expected.json``) in a commit that says why.
The corpus test only reads; nothing regenerates and compares in one run.

    python benchmarks/corpus_snapshot.py [--out tests/corpus/expected.new.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus.corpus_data import REVIEWED, summary, traces  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REVIEWED.with_name("expected.new.json"))
    args = ap.parse_args()
    if args.out.resolve() == REVIEWED.resolve():
        print("error: the reviewed snapshot is replaced by hand after review, not written here",
              file=sys.stderr)
        return 2
    data = {rel: summary(rel) for rel in traces()}
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    old = json.loads(REVIEWED.read_text(encoding="utf-8")) if REVIEWED.exists() else {}
    for rel in sorted(set(old) | set(data)):
        a, b = old.get(rel), data.get(rel)
        if a != b:
            print(f"{rel}\n  reviewed:  {a}\n  candidate: {b}")
    print(f"candidate written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
