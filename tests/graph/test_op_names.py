"""Idle causes and operator labels group by operator, not by each call's profiler counters
(issue 33, item 3)."""

from __future__ import annotations

from collections import Counter

from advisor.graph.frames import call_label
from advisor.graph.model import RangeSource
from advisor.graph.op_names import nvtx_operator, operator_name
from advisor.graph.step_breakdown import idle_segments
from advisor.ingest.base import load_trace
from tests.conftest import shared


def test_emit_nvtx_operator_ranges_group_by_operator_in_idle_causes():
    """nsys-ai's 2x H100 FSDP capture names every operator call ``aten::mul, seq = 46207,
    op_id = 993760``: its idle causes were 885 rows, 850 of them one operator call each. The
    nsys ingest reads those ranges as operators named ``aten::mul`` (issue 37), so no cause
    keeps a counter and each operator is one row holding all its calls."""
    graph = load_trace(shared("nsys-ai/mfu_2gpu_before.sqlite"))
    operators = [r for r in graph.ranges if r.source is RangeSource.OPERATOR]
    assert len(operators) > 1000 and not [r for r in operators if "=" in r.name]
    assert sum(1 for r in operators if r.sequence >= 0) > 1000  # the counters were read
    causes: Counter[str] = Counter()
    for step in graph.steps:
        for _a, _b, cause in idle_segments(graph, step):
            causes[cause] += 1
    assert causes and not [c for c in causes if "op_id" in c or "seq =" in c]
    assert len(causes) < 100
    grouped = [c for c in causes if c in {r.name for r in operators}]
    assert grouped and max(causes[c] for c in grouped) > 1


def test_operator_name_strips_counters_and_sizes_only():
    assert operator_name("aten::mul, seq = 46207, op_id = 993760") == "aten::mul"
    assert operator_name("aten::to, op_id = 317177") == "aten::to"
    assert operator_name("aten::addmm, seq = 3, op_id = 9, sizes = [[64], [64, 8]], "
                         "input_op_ids = [1, 2]") == "aten::addmm"
    assert operator_name("FSDP::pre_forward (blocks.10)") == "FSDP::pre_forward (blocks.10)"
    assert call_label("aten::mul, seq = 46207, op_id = 993760") == "aten::mul"


# Range texts as emit_nvtx wrote them into real nsys exports: the HF GPT-2 capture's shape probe
# (fixtures/public/hf-gpt2/nsys.sqlite.gz) and nsys-ai's FSDP capture.
def test_an_emit_nvtx_operator_range_gives_name_sequence_and_shapes():
    op = nvtx_operator("aten::to, seq = 2694, op_id = 1, sizes = [[8, 1024], [], [], [], [], [], "
                       "[], []], input_op_ids = [(0,-1), (0,-1), (0,-1), (0,-1), (0,-1), (0,-1)]")
    assert op is not None and op.operator and not op.backward
    assert (op.name, op.sequence) == ("aten::to", 2694)
    assert op.shapes == ((8, 1024), (), (), (), (), (), (), ())
    assert nvtx_operator("aten::copy_, op_id = 990350") == type(op)("aten::copy_", True)


def test_backward_nodes_carry_the_forward_sequence_number():
    node = nvtx_operator("DivBackward0, seq = 3142, op_id = 1225, sizes = [[]], "
                         "input_op_ids = [(1220,0)]")
    assert node is not None and node.backward and node.operator and node.sequence == 3142
    engine = nvtx_operator("autograd::engine::evaluate_function: DivBackward0, op_id = 1224")
    assert engine is not None and engine.backward and engine.operator and engine.sequence == -1


def test_record_function_scopes_and_plain_ranges_are_not_operators():
    scope = nvtx_operator("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__, op_id = 13")
    assert scope is not None and not scope.operator
    assert scope.name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert nvtx_operator("FSDP::pre_forward (blocks.10)") is None
    assert nvtx_operator("step 5") is None and nvtx_operator("forward") is None
