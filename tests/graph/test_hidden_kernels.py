"""CUDA graph replays that nsys traced as one row: the analysis says the kernel rules are blind there.

Real captures only: the uncaptured-cuda-graph and cpu-bound-loss fixed steps (fit and check
sets) replay their whole step as a CUDA graph, captured by nsys with its default
``--cuda-graph-trace=graph`` and by torch.profiler, which lists the graph's kernels. On the
uncaptured-cuda-graph ones fp32-matmul is a true finding (1.39x and 1.54x measured on the H200,
docs/validation.md) that only the torch.profiler capture can raise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.graph.hidden_kernels import HIDDEN_SHARE, hidden_kernel_note
from advisor.graph.model import GpuOpKind
from advisor.graph.queries import steps_ops

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GRAPHED = [f"{s}/{r}/good" for s in ("scenarios", "scenarios-check")
           for r in ("uncaptured-cuda-graph", "cpu-bound-loss")]


def _graph_share(path: Path) -> float:
    a = analyze(path)
    ops = steps_ops(a.graph, a.context.steps)
    return (sum(o.duration_ns for o in ops if o.kind is GpuOpKind.GRAPH)
            / sum(o.duration_ns for o in ops))


@pytest.mark.parametrize("step", GRAPHED)
def test_a_step_replayed_as_graph_rows_warns_that_its_kernels_are_unseen(step):
    a = analyze(FIXTURES / step / "nsys.sqlite.gz")
    note = hidden_kernel_note(a.graph, a.context.steps)
    assert note is not None and note in a.warnings
    assert note.startswith("100% of the steps' GPU time")
    assert "--cuda-graph-trace=node" in note
    assert not any(o.kind is GpuOpKind.KERNEL for o in steps_ops(a.graph, a.context.steps))


@pytest.mark.parametrize("step", GRAPHED)
def test_the_same_step_under_torch_profiler_lists_its_kernels_and_does_not_warn(step):
    a = analyze(FIXTURES / step / "trace.json.gz")
    assert not any(o.kind is GpuOpKind.GRAPH for o in a.graph.gpu_ops)
    kernels = [o for o in steps_ops(a.graph, a.context.steps) if o.kind is GpuOpKind.KERNEL]
    assert len(kernels) >= 10 * len(a.context.steps)  # the graph's kernels, one by one
    assert hidden_kernel_note(a.graph, a.context.steps) is None
    assert not any("cuda-graph-trace" in w for w in a.warnings)


def test_graph_rows_under_the_threshold_do_not_warn():
    """A training script that graphs a small part of its step (4% of its GPU time here): the
    kernel rules see the rest, which is where any finding of theirs would be."""
    path = FIXTURES / "cuda-graphs" / "train_graphtrace.sqlite.gz"
    share = _graph_share(path)
    assert 0 < share < HIDDEN_SHARE
    a = analyze(path)
    assert hidden_kernel_note(a.graph, a.context.steps) is None


def test_the_json_report_carries_the_warning():
    path = FIXTURES / "scenarios" / "uncaptured-cuda-graph" / "good" / "nsys.sqlite.gz"
    done = subprocess.run([sys.executable, "-m", "advisor.cli", "analyze", str(path), "--json",
                           "-", "-q"], capture_output=True, text=True, check=True)
    warnings = json.loads(done.stdout)["warnings"]
    assert any("CUDA graph replays traced as one row" in w for w in warnings)
