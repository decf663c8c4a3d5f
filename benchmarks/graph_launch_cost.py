"""What one CUDA graph replay costs the host, measured without a profiler (issue 35).

    python3 benchmarks/graph_launch_cost.py [--json OUT.json]   # needs a CUDA GPU

`advisor.engine.whatif.GRAPH_LAUNCH_NS` is the host time the what-if replay charges a captured
step for its ``cudaGraphLaunch``. Its first value was read off profiled captures, where the
profilers' own callbacks inflate every CUDA call (112-370 µs per graph launch under nsys and
Kineto), so it is measured here as the user's host pays it: `torch.cuda.CUDAGraph.replay()` from
Python, timed by the host clock, with no tool attached.

For graphs of 1 to 4,000 nodes (a training step captured whole holds hundreds to thousands of
kernels), each a chain of tiny kernels on one tensor: after a warm replay, R replays each timed
alone from an idle GPU (``sync``: the host cost of a launch with an empty queue), and R replays
back to back (``queued``: the launch while earlier replays still run, as in a loop of captured
steps). Prints a table (median and p90 in µs) and writes the figures as JSON for
`tests/engine/test_graph_launch_constant.py`, which holds the model's constant to them.
Also times the eager launch of the same kernel (`x.add_(1)`), the per-operator host cost a graph
saves, as a reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

NODES = (1, 10, 100, 1000, 4000)
ROUNDS = 200


def _graph(torch, x, nodes: int):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch's docs ask
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(nodes):
            x.add_(1)
    g.replay()  # the first launch uploads the graph: not what a loop pays
    torch.cuda.synchronize()
    return g


def _pct(values: list[int], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] / 1e3


def measure(torch, rounds: int = ROUNDS) -> dict:
    clock = time.perf_counter_ns
    x = torch.zeros(1, device="cuda")
    rows = []
    for nodes in NODES:
        g = _graph(torch, x, nodes)
        alone = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            t0 = clock()
            g.replay()
            alone.append(clock() - t0)
        torch.cuda.synchronize()
        queued = []
        for _ in range(rounds):
            t0 = clock()
            g.replay()
            queued.append(clock() - t0)
        torch.cuda.synchronize()
        rows.append({"nodes": nodes, "sync_median_us": statistics.median(alone) / 1e3,
                     "sync_p90_us": _pct(alone, 0.9),
                     "queued_median_us": statistics.median(queued) / 1e3,
                     "queued_p90_us": _pct(queued, 0.9)})
        del g
    eager = []
    for _ in range(rounds):
        t0 = clock()
        x.add_(1)
        eager.append(clock() - t0)
    torch.cuda.synchronize()
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "rounds": rounds, "graphs": rows,
            "eager_add_median_us": statistics.median(eager) / 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("graph_launch_cost: needs a CUDA GPU")
    out = measure(torch, args.rounds)
    print(f"{out['device']}, torch {out['torch']}, CUDA {out['cuda']}, {out['rounds']} replays each")
    print(f"{'nodes':>6} {'alone med':>10} {'alone p90':>10} {'queued med':>11} {'queued p90':>11}  (µs)")
    for r in out["graphs"]:
        print(f"{r['nodes']:>6} {r['sync_median_us']:>10.1f} {r['sync_p90_us']:>10.1f} "
              f"{r['queued_median_us']:>11.1f} {r['queued_p90_us']:>11.1f}")
    print(f"eager x.add_(1): {out['eager_add_median_us']:.1f} µs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
