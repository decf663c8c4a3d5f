"""Job rules against measured DDP runs: estimate vs the speedup the fix measured unprofiled.

Reads a folder written by ``scenarios/ddp-job/train_ddp.py`` (``measured.json`` and one folder of
rank traces per variant, or ``<variant>.tar`` files of them), analyses each variant as a job and
prints, for each anti-pattern and its fix, the job rule's estimate next to the measured speedup:

    python benchmarks/validate_job.py fixtures/jobs/h200x2-ddp
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

from advisor.job.api import analyze_job

PAIRS = [
    # (bad variant, fixed variant, the rule that should name it)
    ("slow-rank", "slow-rank-fixed", "straggler-rank"),
    ("accum-sync", "accum-nosync", "exposed-communication"),
    ("tiny-bucket", "baseline", "exposed-communication"),
]


def unpack(folder: Path) -> None:
    for tar in folder.glob("*.tar"):
        if not (folder / tar.stem).is_dir():
            with tarfile.open(tar) as t:
                t.extractall(folder, filter="data")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    unpack(args.folder)
    measured = json.loads((args.folder / "measured.json").read_text())["step_ms"]
    jobs = {}
    for name in measured:
        if (args.folder / name).is_dir():
            jobs[name] = analyze_job([args.folder / name], workers=args.workers, rank_rules="none")
    print("| variant | measured step ms (unprofiled) | profiled job step ms | straggler | job findings |")
    print("|---|---:|---:|---|---|")
    for name, job in jobs.items():
        s = job.straggler
        found = "; ".join(f"{f.rule} {f.estimate.speedup:.2f}x ({f.estimate.low:.2f}-{f.estimate.high:.2f}): "
                          f"{f.fix.title}" for f in job.findings) or "none"
        print(f"| {name} | {measured[name]:.2f} | {job.step_ns / 1e6:.2f} | "
              f"{f'rank {s.rank} ({s.cause})' if s else '-'} | {found} |")
    print()
    print("| anti-pattern -> fix | rule | estimated | measured |")
    print("|---|---|---:|---:|")
    for bad, good, rule in PAIRS:
        if bad not in jobs or good not in measured:
            continue
        est = [f.estimate for f in jobs[bad].findings if f.rule == rule]
        got = measured[bad] / measured[good]
        e = f"{est[0].speedup:.2f}x ({est[0].low:.2f}-{est[0].high:.2f})" if est else "not raised"
        print(f"| {bad} -> {good} | {rule} | {e} | {got:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
