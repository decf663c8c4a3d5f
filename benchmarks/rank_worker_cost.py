"""A Dask worker's CPU per rank file, old and new code in turn: the job path's per-rank cost.

On a shared machine a 1,024-rank run's wall time measures the load as much as the code; this
measures what each rank costs a worker, in CPU seconds, with the code before and after a change
taking turns in the same minutes. Each measurement is a fresh process that imports
``distributed`` (a worker's live objects, which a full collection walks) and runs
`advisor.job.cluster.summarize_files` over batches of 16 files, as the cluster does:

    python benchmarks/rank_worker_cost.py --old /tmp/speed-before DIR [DIR ...] [--files 48]

``--old`` is another checkout's tree with ``rules/`` at ``advisor/rules`` (``git archive REV
advisor rules`` and a move); DIRs are rank folders (`speed_table.py`'s, under
``$TMPDIR/advisor-speed-ranks``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import sys, time, glob
import distributed  # noqa: F401
from advisor.job.cluster import summarize_files
from advisor.ingest.base import LoadOptions
files = sorted(glob.glob(sys.argv[1] + "/*"))[:int(sys.argv[2])]
o = LoadOptions()
summarize_files([(files[0], 0)], o)  # imports and caches, untimed
t = time.process_time()
for i in range(0, len(files), 16):
    summarize_files([(f, j) for j, f in enumerate(files[i:i + 16], start=i)], o)
print((time.process_time() - t) / len(files) * 1000)
"""


def cost(tree: Path, folder: Path, files: int) -> float:
    """CPU ms per file of ``tree``'s advisor over ``folder``'s first ``files`` rank files."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(files)], env=env,
                         cwd="/", capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--files", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print("| rank folder | before ms CPU a file | after ms CPU a file | change | load |")
    print("|---|---:|---:|---:|---:|")
    for folder in args.folders:
        old, new = [], []
        for _ in range(args.rounds):
            old.append(cost(args.old.resolve(), folder, args.files))
            new.append(cost(REPO, folder, args.files))
        print(f"| {folder.name} | {min(old):.0f}-{max(old):.0f} | {min(new):.0f}-{max(new):.0f} "
              f"| {(min(new) / min(old) - 1) * 100:+.0f}% | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
