"""Launch statistics against HTA's definitions, on real Kineto captures (docs/peers.md).

HTA's ``get_cuda_kernel_launch_stats`` joins each kernel to its ``cudaLaunchKernel`` by
correlation id and reports the call's duration (``cpu_duration``), the kernel's
(``gpu_duration``) and the launch delay (kernel start minus call start); its "short GPU kernels"
are those shorter than their launch call. Here the same join is made independently, on the raw
trace JSON, for the kernels of advisor's analysed steps, and advisor's figures must agree."""

from __future__ import annotations

import gzip
import json
from functools import cache

import pytest

from advisor.analysis import analyze
from advisor.graph.launch_stats import _quantile, launch_stats
from tests.conftest import ROOT

GPU_BOUND = ROOT / "fixtures" / "public" / "nanogpt" / "trace.json.gz"  # GPT-2 124M, H100
LAUNCH_BOUND = ROOT / "fixtures" / "scenarios" / "uncaptured-cuda-graph" / "bad" / "trace.json.gz"


@cache
def _stats(path):
    a = analyze(str(path), ["gemm-shape-alignment"])
    steps = [b.step for b in a.summary.steps]
    kernels = {o.correlation for s in steps
               for o in a.graph.process_ops_launched_in(s.pid, s.cpu_start_ns, s.cpu_end_ns)
               if o.kind.value == "kernel" and o.correlation is not None}
    return launch_stats(a.graph, steps), kernels


def _raw_hta(path, correlations: set[int], driver: bool = True) -> tuple[list[float], int]:
    """HTA's join on the raw events: (launch call durations in us, kernels shorter than it).
    ``driver``: the driver API's launches too (``cuLaunchKernelEx``, Kineto category
    ``cuda_driver``), which HTA, joining ``cudaLaunchKernel`` only, leaves out."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    cats = ("cuda_runtime", "cuda_driver") if driver else ("cuda_runtime",)
    calls = {e["args"]["correlation"]: e["dur"] for e in events
             if e.get("cat") in cats and e.get("ph") == "X"
             and e["name"].startswith(("cudaLaunch", "cuLaunch"))}
    durs, short = [], 0
    for e in events:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            c = e.get("args", {}).get("correlation")
            if c in correlations and c in calls:
                durs.append(calls[c])
                short += e["dur"] < calls[c]
    return sorted(durs), short


@pytest.mark.parametrize("path", [GPU_BOUND, LAUNCH_BOUND], ids=["gpu-bound", "launch-bound"])
def test_launch_calls_and_short_kernels_match_htas_join(path):
    st, kernels = _stats(path)
    durs, short = _raw_hta(path, kernels)
    assert st.launched == len(durs) > 0
    # the trace's microsecond floats against advisor's integer nanoseconds: one tick apart
    p50, p90, top = st.call_ns
    assert p50 / 1e3 == pytest.approx(_quantile(durs, 0.5), abs=1e-3)
    assert p90 / 1e3 == pytest.approx(_quantile(durs, 0.9), abs=1e-3)
    assert top / 1e3 == pytest.approx(durs[-1], abs=1e-3)
    assert st.shorter_than_launch == pytest.approx(short / len(durs), abs=2 / len(durs))


def test_htas_runtime_only_join_misses_the_driver_launches():
    """cuBLAS launches Hopper's nvjet GEMMs through ``cuLaunchKernelEx``: on the GPT-2 capture
    a join on ``cudaLaunchKernel`` alone (HTA's) sees 2,912 of the 4,277 launched kernels."""
    st, kernels = _stats(GPU_BOUND)
    runtime_only, _ = _raw_hta(GPU_BOUND, kernels, driver=False)
    assert len(runtime_only) == 2912 and st.launched == 4277


def test_the_backward_threads_launches_are_counted():
    """Autograd runs the backward on its own thread: of the GPT-2 step's 4,277 kernels its
    training thread launches 1,659; launch statistics over that thread alone described the
    forward and the optimizer, not the step."""
    a = analyze(str(GPU_BOUND), ["gemm-shape-alignment"])
    steps = [b.step for b in a.summary.steps]
    own = sum(1 for s in steps for o in a.graph.step_ops(s) if o.kind.value == "kernel")
    st, _ = _stats(GPU_BOUND)
    assert own == 1659 and st.launched == 4277
    assert st.kernels_per_step == pytest.approx(4277 / len(steps))


def test_a_launch_bound_step_has_more_kernels_shorter_than_their_launch():
    gpu, _ = _stats(GPU_BOUND)
    launch, _ = _stats(LAUNCH_BOUND)
    assert launch.shorter_than_launch > 1.5 * gpu.shorter_than_launch
    d = gpu.to_dict()
    assert set(d["launch_call_us"]) == {"p50", "p90", "max"}
    assert 0 <= d["shorter_than_launch"] <= 1


def test_single_launches_of_the_most_variable_kernels_match_the_raw_durations():
    """Each variability entry's launches and p50/p90/max of one launch, against the kernel
    events of the raw trace (the same kernels: name, grid, analysed steps)."""
    a = analyze(str(GPU_BOUND), ["gemm-shape-alignment"])
    steps = [b.step for b in a.summary.steps]
    st = launch_stats(a.graph, steps)
    events = json.loads(gzip.decompress(GPU_BOUND.read_bytes()))["traceEvents"]
    dur = {e["args"]["correlation"]: e["dur"] for e in events
           if e.get("cat") == "kernel" and e.get("ph") == "X"}
    from advisor.graph.kernels import short_name

    kernels = [o for s in steps for o in a.graph.process_ops_launched_in(s.pid, s.cpu_start_ns, s.cpu_end_ns)
               if o.kind.value == "kernel"]
    full: dict[tuple, set[str]] = {}
    for o in kernels:
        full.setdefault((short_name(o.name), o.grid), set()).add(o.name)
    # entries whose short name stands for one kernel (templates' arguments are cut from it)
    checked = [v for v in st.variability if len(full[(v.kernel, v.grid)]) == 1][:8]
    assert len(checked) >= 5
    for v in checked:
        mine = sorted(dur[o.correlation] for o in kernels
                      if o.grid == v.grid and short_name(o.name) == v.kernel)
        assert v.launches == len(mine) >= len(steps)
        for got, q in zip(v.instance_ns, (0.5, 0.9, 1.0), strict=True):
            assert got / 1e3 == pytest.approx(_quantile(mine, q), abs=1e-3)
        assert v.instance_ns[0] <= v.instance_ns[1] <= v.instance_ns[2]
