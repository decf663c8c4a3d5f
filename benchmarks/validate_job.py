"""Job rules against measured DDP runs: estimate vs the speedup the fix measured unprofiled.

Reads what ``scenarios/ddp-job/run_h200x2.sh`` brought back (``ddp-validation.tgz.part-*``, or the
folder they unpack to: ``measured.json``, ``torch/<variant>/rank*.json.gz`` from torch.profiler,
``nsys/<variant>.sqlite`` from nsys, every rank's process in one report), analyses each variant
as a job from each profiler and prints, per variant, the job as each one sees it, then per
anti-pattern and its fix the job rule's estimate next to the speedup measured without a profiler:

    python benchmarks/validate_job.py FOLDER [--workers 2]

Where the run timed its variants several times in turn (``--repeats``), the measured step is
the median of the runs and the speedup's range over the runs (bad and fixed of the same turn)
is printed beside it.

The older layout (``measured.json`` beside ``<variant>/`` or ``<variant>.tar``) reads too.
"""

from __future__ import annotations

import argparse
import io
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


def unpack(folder: Path) -> Path:
    """The folder holding ``measured.json``, after unpacking whatever archives came back."""
    parts = sorted(folder.glob("ddp-validation.tgz.part-*"))
    if parts and not (folder / "unpacked" / "measured.json").exists():
        data = b"".join(p.read_bytes() for p in parts)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
            t.extractall(folder / "unpacked", filter="data")
    root = folder / "unpacked" if parts else folder
    for tar in root.glob("*.tar"):  # the older layout: one tar per variant
        if not (root / tar.stem).is_dir():
            with tarfile.open(tar) as t:
                t.extractall(root, filter="data")
    return root


def sources(root: Path, variant: str) -> dict[str, list[Path]]:
    """The traces of one variant, by profiler."""
    out = {}
    for folder in (root / "torch" / variant, root / variant):
        if folder.is_dir() and any(folder.glob("rank*.json.gz")):
            out["torch.profiler"] = [folder]
            break
    for nsys in (root / "nsys" / f"{variant}.sqlite", root / "nsys" / f"{variant}.sqlite.gz"):
        if nsys.is_file():
            out["nsys"] = [nsys]
            break
    return out


def describe(job) -> str:
    s = job.straggler
    found = "; ".join(f"{f.rule} {f.estimate.speedup:.2f}x ({f.estimate.low:.2f}-{f.estimate.high:.2f})"
                      for f in job.findings) or "none"
    return f"{job.step_ns / 1e6:.2f} | {f'rank {s.rank} ({s.cause})' if s else '-'} | {found}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    root = unpack(args.folder)
    meta = json.loads((root / "measured.json").read_text())
    measured = meta["step_ms"]
    print(f"{meta.get('world_size')} ranks on {meta.get('device')}, torch {meta.get('torch')}")
    jobs: dict[tuple[str, str], object] = {}
    for name in measured:
        for profiler, paths in sources(root, name).items():
            jobs[(name, profiler)] = analyze_job(paths, workers=args.workers, rank_rules="none")
    print("| variant | measured step ms (unprofiled) | profiler | job step ms | straggler | job findings |")
    print("|---|---:|---|---:|---|---|")
    for (name, profiler), job in jobs.items():
        print(f"| {name} | {measured[name]:.2f} | {profiler} | {describe(job)} |")
    print()
    print("| anti-pattern -> fix | rule | profiler | estimated | measured |")
    print("|---|---|---|---:|---:|")
    runs = meta.get("step_ms_runs", {})
    for bad, good, rule in PAIRS:
        if bad not in measured or good not in measured:
            continue
        got = measured[bad] / measured[good]
        pairs = [b / g for b, g in zip(runs.get(bad, []), runs.get(good, []), strict=False)]
        spread = f" ({min(pairs):.2f}-{max(pairs):.2f} over {len(pairs)} runs)" if len(pairs) > 1 else ""
        for (name, profiler), job in jobs.items():
            if name != bad:
                continue
            est = [f.estimate for f in job.findings if f.rule == rule]
            e = f"{est[0].speedup:.2f}x ({est[0].low:.2f}-{est[0].high:.2f})" if est else "not raised"
            print(f"| {bad} -> {good} | {rule} | {profiler} | {e} | {got:.2f}x{spread} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
