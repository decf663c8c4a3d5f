"""CPU time of compiler-fusion on nsys exports: its chain search alone, and its whole check.

    python benchmarks/compiler_fusion_time.py TRACE...            # the traces given
    python benchmarks/compiler_fusion_time.py --repeated TRACE... # and the ~15 MB export of
                                                                  # docs/performance.md as well

The chain search (`advisor.graph.chains.find_chains`) is one pass over the window's GPU ops per
stream; the check adds the rule's three what-if replays (estimate, low, high). Best of 3 (search)
and of 2 (check) in ``time.process_time``, each on a fresh graph cache.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from advisor.rules.compiler_fusion import CompilerFusion

from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.host import HostFacts
from advisor.graph.chains import find_chains
from advisor.ingest.base import load_trace


def measure(path: Path) -> str:
    graph = load_trace(path)
    steps = analysed_steps(graph)
    search = check = float("inf")
    for _ in range(3):
        graph.__dict__.pop("_chains", None)
        t0 = time.process_time()
        find_chains(graph, steps)
        search = min(search, time.process_time() - t0)
    found = []
    for _ in range(2):
        ctx = RuleContext(graph, steps, {}, HostFacts(), None)
        _ = ctx.baseline  # the template replay, shared by every rule: not compiler-fusion's
        graph.__dict__.pop("_chains", None)
        t0 = time.process_time()
        found = list(CompilerFusion().check(graph, ctx))
        check = min(check, time.process_time() - t0)
    est = f"{found[0].estimate.speedup:.3f}x" if found else "not raised"
    return (f"| {path.name} | {len(graph.gpu_ops):,} | {len(steps)} | {search * 1e3:.0f} ms "
            f"| {check * 1e3:.0f} ms | {est} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeated", action="store_true",
                        help="also the CPU-bound-loss export repeated to ~15 MB")
    args = parser.parse_args()
    print("| export | GPU ops in the window | steps | chain search | whole check | estimate |")
    print("|---|---:|---:|---:|---:|---|")
    for p in args.traces:
        print(measure(p), flush=True)
    if args.repeated:
        import analysis_scaling

        with tempfile.TemporaryDirectory(prefix="advisor-cf-") as tmp:
            big = analysis_scaling.build_repeated(Path(tmp), [(0.0145, 0)])[0]
            print(measure(big.path), flush=True)


if __name__ == "__main__":
    main()
