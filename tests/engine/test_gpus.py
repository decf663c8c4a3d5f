"""Device names as nsys (TARGET_INFO_GPU) and torch.profiler (deviceProperties, i.e.
``torch.cuda.get_device_name``) write them, to the spec whose peaks the efficiency view and the
precision rules divide by. A name taken by the wrong pattern changes every roofline and MFU of
that trace: ``H20\\b`` once sat in the H200's pattern and gave an H20 (148 TFLOP/s BF16) the
H200's 989."""

from __future__ import annotations

import pytest

from advisor.engine.gpus import lookup


@pytest.mark.parametrize(("name", "cap", "spec", "bf16", "gbs"), [
    ("NVIDIA H100 80GB HBM3", "9.0", "H100 SXM", 989, 3350),
    ("NVIDIA H100 PCIe", "9.0", "H100 PCIe", 756, 2000),
    ("NVIDIA H100 NVL", "9.0", "H100 NVL", 835.5, 3900),
    ("NVIDIA H800", "9.0", "H100 SXM", 989, 3350),
    ("NVIDIA H800 PCIe", "9.0", "H100 PCIe", 756, 2000),
    ("NVIDIA GH200 480GB", "9.0", "H100 SXM", 989, 3350),
    ("NVIDIA H200", "9.0", "H200", 989, 4800),
    ("NVIDIA H200 NVL", "9.0", "H200", 989, 4800),
    ("NVIDIA H20", "9.0", "H20", 148, 4000),
    ("NVIDIA A100-SXM4-80GB", "8.0", "A100", 312, 2039),
    ("NVIDIA A100-PCIE-40GB", "8.0", "A100", 312, 2039),
    ("NVIDIA A10G", "8.6", "A10", 125, 600),
    ("NVIDIA B200", "10.0", "B200", 2250, 8000),
    ("Tesla V100-SXM2-32GB", "7.0", "V100", None, 900),
])
def test_device_names_as_the_traces_write_them(name, cap, spec, bf16, gbs):
    s = lookup(name, cap)
    assert s is not None, name
    assert (s.name, s.bf16, s.bandwidth_gbs) == (spec, bf16, gbs)


def test_h20_and_h200_are_not_confused_either_way():
    """The two names differ by one character and one matches the other's prefix: each gets its
    own spec, in both orders of the list the patterns are tried in."""
    h20, h200 = lookup("NVIDIA H20", "9.0"), lookup("NVIDIA H200", "9.0")
    assert h20.name == "H20" and h200.name == "H200"
    assert h200.bf16 / h20.bf16 > 6  # 989 against 148: the H20 is the compute-starved one
    assert h20.has_fp8 and h20.tf32 == 74


def test_unknown_names_fall_back_on_the_capability_only_for_nvidia():
    assert lookup("NVIDIA H999", "9.0").capability == (9, 0)
    assert lookup("AMD Instinct MI300X", "9.4") is None
