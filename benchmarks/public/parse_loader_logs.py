"""Step times of pytorch/examples imagenet/main.py from its own log (no profiler).

    python3 parse_loader_logs.py LOGDIR     # LOGDIR/j*.log -> JSON on stdout
    python3 parse_loader_logs.py --slow DIR  # wave5_loader_slow.sh's DIR -> the table

main.py prints ``Epoch: [0][ i/n]  Time  0.812 ( 0.950)  Data  0.750 ( 0.801) ...`` per
iteration with ``-p 1``: ``Time`` is the iteration's wall time, ``Data`` its wait for the
batch. The first iterations hold worker start-up and cuDNN's first calls: ``step_ms`` is the
median over iterations from `SKIP` on. With worker processes, DataLoader prefetches 2 x workers
batches while the first iteration waits for the workers; until that queue drains the steps do
not wait for the workers' throughput. ``steady_step_ms`` is the median of the epoch's last
quarter (`STEADY_SHARE`), where the queue has drained (the epoch holds more than 4 x 2 x workers
iterations) and what the loop runs at for the rest of training.
"""

import json
import re
import statistics
import sys
from pathlib import Path

SKIP = 5
STEADY_SHARE = 0.25
LINE = re.compile(r"Epoch: \[\d+\]\[\s*(\d+)/\s*\d+\]\s+Time\s+([\d.]+)\s+\(\s*[\d.]+\)\s+"
                  r"Data\s+([\d.]+)")


def parse(path: Path) -> dict:
    rows = [(int(m[1]), float(m[2]), float(m[3])) for m in LINE.finditer(path.read_text())]
    total = re.search(r"Epoch: \[\d+\]\[\s*\d+/\s*(\d+)\]", path.read_text())
    rows = [r for r in rows if r[0] >= SKIP]
    if not rows:
        return {"iterations": 0}
    n = int(total[1]) if total else rows[-1][0]
    tail = [r for r in rows if r[0] > n * (1 - STEADY_SHARE)] or rows
    return {"iterations": len(rows), "epoch_iterations": n,
            "step_ms": round(1e3 * statistics.median(r[1] for r in rows), 2),
            "data_wait_ms": round(1e3 * statistics.median(r[2] for r in rows), 2),
            "steady_step_ms": round(1e3 * statistics.median(r[1] for r in tail), 2),
            "steady_data_wait_ms": round(1e3 * statistics.median(r[2] for r in tail), 2),
            "steady_iterations": len(tail)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--slow"] and len(argv) == 2:
        from loader_slow_table import table  # beside this file: needs advisor installed

        print(table(Path(argv[1])))
        return 0
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    logs = Path(argv[0])
    out = {p.stem: parse(p) for p in sorted(logs.glob("j*.log"))}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
