"""Idle causes and operator labels group by operator, not by each call's profiler counters
(issue 33, item 3)."""

from __future__ import annotations

from collections import Counter

from advisor.graph.frames import call_label
from advisor.graph.op_names import operator_name
from advisor.graph.step_breakdown import idle_segments
from advisor.ingest.base import load_trace
from tests.conftest import shared


def test_emit_nvtx_operator_ranges_group_by_operator_in_idle_causes():
    """nsys-ai's 2x H100 FSDP capture names every operator call ``aten::mul, seq = 46207,
    op_id = 993760``: its idle causes were 885 rows, 850 of them one operator call each. Grouped
    by operator, no cause keeps a counter and each operator is one row holding all its calls."""
    graph = load_trace(shared("nsys-ai/mfu_2gpu_before.sqlite"))
    raw_names = {r.name for r in graph.ranges if "op_id = " in r.name}
    assert len(raw_names) > 1000  # the trace really carries per-call counters
    causes: Counter[str] = Counter()
    for step in graph.steps:
        for _a, _b, cause in idle_segments(graph, step):
            causes[cause] += 1
    assert causes and not [c for c in causes if "op_id" in c or "seq =" in c]
    assert len(causes) < 100
    grouped = [c for c in causes if c in {operator_name(n) for n in raw_names}]
    assert grouped and max(causes[c] for c in grouped) > 1


def test_operator_name_strips_counters_and_sizes_only():
    assert operator_name("aten::mul, seq = 46207, op_id = 993760") == "aten::mul"
    assert operator_name("aten::to, op_id = 317177") == "aten::to"
    assert operator_name("aten::addmm, seq = 3, op_id = 9, sizes = [[64], [64, 8]], "
                         "input_op_ids = [1, 2]") == "aten::addmm"
    assert operator_name("FSDP::pre_forward (blocks.10)") == "FSDP::pre_forward (blocks.10)"
    assert call_label("aten::mul, seq = 46207, op_id = 993760") == "aten::mul"
