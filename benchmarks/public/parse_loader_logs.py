"""Step times of pytorch/examples imagenet/main.py from its own log (no profiler).

    python3 parse_loader_logs.py LOGDIR     # LOGDIR/j*.log -> JSON on stdout

main.py prints ``Epoch: [0][ i/n]  Time  0.812 ( 0.950)  Data  0.750 ( 0.801) ...`` per
iteration with ``-p 1``: ``Time`` is the iteration's wall time, ``Data`` its wait for the
batch. The first iterations hold worker start-up and cuDNN's first calls: the median is taken
over iterations from `SKIP` on.
"""

import json
import re
import statistics
import sys
from pathlib import Path

SKIP = 5
LINE = re.compile(r"Epoch: \[\d+\]\[\s*(\d+)/\s*\d+\]\s+Time\s+([\d.]+)\s+\(\s*[\d.]+\)\s+"
                  r"Data\s+([\d.]+)")


def parse(path: Path) -> dict:
    rows = [(int(m[1]), float(m[2]), float(m[3])) for m in LINE.finditer(path.read_text())]
    rows = [r for r in rows if r[0] >= SKIP]
    if not rows:
        return {"iterations": 0}
    return {"iterations": len(rows),
            "step_ms": round(1e3 * statistics.median(r[1] for r in rows), 2),
            "data_wait_ms": round(1e3 * statistics.median(r[2] for r in rows), 2)}


if __name__ == "__main__":
    logs = Path(sys.argv[1])
    out = {p.stem: parse(p) for p in sorted(logs.glob("j*.log"))}
    print(json.dumps(out, indent=1))
