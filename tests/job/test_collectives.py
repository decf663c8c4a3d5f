"""Which kernels and host ranges are collectives: NCCL's old and new names, PyTorch's ranges."""

from __future__ import annotations

from collections import Counter

import pytest

from advisor.graph.collectives import host_collective, intersection_ns, kernel_collective
from advisor.graph.intervals import merge
from advisor.ingest.base import load_trace
from tests.conftest import shared


@pytest.mark.parametrize(("name", "kind"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "AllReduce"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "AllReduce"),  # NCCL >= 2.19, as in issue 18
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)", "SendRecv"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "Broadcast"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "ReduceScatter"),
    ("ncclDevKernel_AllGather_RING_LL", "AllGather"),
])
def test_kernel_names_old_and_new(name, kind):
    assert kernel_collective(name) == kind


def test_real_traces_collectives_by_kernel_name():
    old = load_trace(shared("hta/nccl_parser_config/nccl_data.json.gz"))
    kinds = Counter(kernel_collective(o.name) for o in old.gpu_ops if "nccl" in o.name.lower())
    assert kinds == {"AllReduce": 15, "Broadcast": 6}
    new = load_trace(shared("nsys-ai/mfu_2gpu_before.sqlite"))
    kinds = Counter(kernel_collective(o.name) for o in new.gpu_ops if "nccl" in o.name.lower())
    assert set(kinds) == {"SendRecv"}


def test_host_ranges_pytorch_and_nccl_emit():
    g = load_trace(shared("hta/negative_queue_length_values_check/rank0.json.gz"))
    kinds = Counter(host_collective(r.name) for r in g.ranges)
    assert kinds["AllToAll"] >= 110  # nccl:all_to_all + c10d::alltoall_base_, 55 each
    assert kinds["AllReduce"] == 20 and kinds["ReduceScatter"] >= 20 and kinds["AllGather"] >= 20
    assert host_collective("aten::gather, op_id = 314496") is None  # not a collective
    assert host_collective("ncclAllReduce") == "AllReduce"  # NCCL's NVTX range in nsys
    assert host_collective("ncclGroupStart") is None


def test_interval_overlap():
    a = merge([(0, 10), (5, 20), (30, 40)])
    assert a == [(0, 20), (30, 40)]
    assert intersection_ns(a, [(15, 35)]) == 10
