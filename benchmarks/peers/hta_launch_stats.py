"""HTA's kernel launch statistics on a Kineto trace, restricted to the kernels of advisor's
analysed steps, beside advisor's own (docs/peers.md, "Measured side by side").

Two halves, two environments: ``hta TRACE CSV`` runs HTA (its own environment) and writes its
per-launch rows; ``compare TRACE CSV`` runs with advisor and prints both over the same kernels.

    /hta/bin/python benchmarks/peers/hta_launch_stats.py hta fixtures/public/nanogpt/trace.json.gz h.csv
    python benchmarks/peers/hta_launch_stats.py compare fixtures/public/nanogpt/trace.json.gz h.csv
"""

from __future__ import annotations

import csv
import shutil
import statistics
import sys
import tempfile
from pathlib import Path


def run_hta(trace: Path, out: Path) -> None:
    """HTA wants a folder of rank traces: the trace is copied in as rank 0."""
    from hta.trace_analysis import TraceAnalysis  # HTA's environment only

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(trace, Path(d) / "rank0.trace.json.gz")
        stats = TraceAnalysis(trace_dir=d).get_cuda_kernel_launch_stats(visualize=False)
    next(iter(stats.values())).to_csv(out, index=False)


def compare(trace: Path, rows_csv: Path) -> None:
    from advisor.analysis import analyze
    from advisor.graph.launch_stats import launch_stats

    a = analyze(str(trace), ["gemm-shape-alignment"])
    steps = [b.step for b in a.summary.steps]
    kernels = {o.correlation for s in steps for o in a.graph.step_ops(s)
               if o.kind.value == "kernel" and o.correlation is not None}
    st = launch_stats(a.graph, steps).to_dict()
    with open(rows_csv) as f:
        rows = [r for r in csv.DictReader(f) if int(float(r["correlation"])) in kernels]
    if not rows:
        print("HTA: no launch of the analysed steps' kernels")
        return
    cpu = sorted(float(r["cpu_duration"]) for r in rows)
    delay = sorted(float(r["launch_delay"]) for r in rows)
    short = sum(float(r["gpu_duration"]) < float(r["cpu_duration"]) for r in rows)
    print(f"advisor: {len(kernels)} kernels; launch call us {st['launch_call_us']}; "
          f"shorter than the call {st['shorter_than_launch']}; launch-to-start us "
          f"{st['launch_to_start_us']}")
    print(f"HTA: {len(rows)} rows; cpu_duration p50 {statistics.median(cpu)} p90 "
          f"{statistics.quantiles(cpu, n=10)[-1]} max {cpu[-1]}; shorter than the call "
          f"{short / len(rows):.4f}; launch_delay p50 {statistics.median(delay)}")


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("hta", "compare"):
        print(__doc__.split("\n\n")[-1])
        return 2
    trace, out = Path(sys.argv[2]), Path(sys.argv[3])
    (run_hta if sys.argv[1] == "hta" else compare)(trace, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
