"""The efficiency and launch sections of the reports, on the nanoGPT GPT-2 H100 capture (BF16,
shapes recorded) and the bundled nsys example (no operator shapes)."""

from __future__ import annotations

import io
import json
import re
from functools import cache

import jsonschema
from rich.console import Console

from advisor.analysis import Analysis, analyze
from advisor.graph.kernels import KernelCategory, classify
from advisor.report.console import efficiency_line, render
from advisor.report.html_report import render_html
from advisor.report.json_report import SCHEMA_PATH, to_dict
from advisor.report.model import build_report
from tests.conftest import ROOT

NANOGPT = ROOT / "fixtures" / "public" / "nanogpt" / "trace.json.gz"
EXAMPLE = ROOT / "advisor" / "examples" / "h100-host-sync.sqlite.gz"


@cache
def run(path: str) -> Analysis:
    return analyze(path, ["gemm-shape-alignment"])


def test_json_carries_mfu_and_validates():
    d = to_dict(run(str(NANOGPT)))
    jsonschema.validate(d, json.loads(SCHEMA_PATH.read_text()))
    e = d["efficiency"]
    assert e["gpu"] == "H100 SXM" and e["precision"] == "fp16/bf16" and e["peak_tflops"] == 989
    # model FLOPs over the report's own baseline step and the BF16 peak
    assert e["mfu"] == round(e["model_flops_per_step"] / (d["baseline_step_ms"] / 1e3) / 989e12, 4)
    assert 0.15 < e["mfu"] < 0.35  # nanoGPT prints 93% of an A100's 312: 29% of 989
    assert e["tensor_core_share"] == 1.0 and e["flops_coverage"] == 1.0
    assert e["kernels"] and all(k["of_roof"] is not None for k in e["kernels"])
    assert all(k["intensity"] and k["bound"] for k in e["roofline"])


def test_launch_statistics_count_the_steps_kernels():
    a = run(str(NANOGPT))
    d = to_dict(a)["launches"]
    steps = [b.step for b in a.summary.steps]
    kernels = sum(1 for s in steps
                  for o in a.graph.process_ops_launched_in(s.pid, s.cpu_start_ns, s.cpu_end_ns)
                  if o.kind.value == "kernel")
    assert d["kernels_per_step"] == round(kernels / len(steps), 2)
    q = d["launch_to_start_us"]
    assert 0 <= q["p10"] <= q["p50"] <= q["p90"] <= q["max"]
    assert d["variability"] and all(v["min_ms"] <= v["median_ms"] <= v["max_ms"]
                                    for v in d["variability"])


def test_console_headline_is_one_line_of_80_columns():
    rep = build_report(run(str(NANOGPT)))
    line = efficiency_line(rep)
    assert re.fullmatch(r"MFU \d+% of H100 SXM fp16/bf16 989 TFLOP/s; tensor cores 100% of GEMM "
                        r"time", line), line
    out = io.StringIO()
    render(rep, Console(file=out, width=80, force_terminal=False))
    assert line in out.getvalue().splitlines()


def test_without_shapes_mfu_is_unknown_with_the_reason():
    a = run(str(EXAMPLE))
    e = to_dict(a)["efficiency"]
    assert e["mfu"] is None and "recorded shapes" in e["reason"]
    has_gemm = any(classify(o) is KernelCategory.GEMM
                   for s in a.summary.steps for o in a.graph.step_ops(s.step))
    assert (e["tensor_core_share"] is None) == (not has_gemm)


def test_html_draws_the_roofline_and_the_table():
    html = render_html(run(str(NANOGPT)))
    svg = re.search(r'<svg class="roofline".*?</svg>', html, re.S)
    assert svg is not None
    assert len(re.findall(r"<circle", svg.group(0))) == len(to_dict(run(str(NANOGPT)))
                                                           ["efficiency"]["roofline"])
    assert 'id="efficiency"' in html and "aten::_cudnn_attention_backward" in html


NSYS_PROBE = ROOT / "fixtures" / "public" / "nanogpt" / "wave4-nsys-flags" / "gpt2-default.sqlite.gz"


def test_a_lower_bound_mfu_is_said_so_in_every_view():
    """`advisor profile --nsys` of nanoGPT: the shape probe sizes every GEMM, not cuDNN's
    attention, so the MFU counts part of the compute time and each view says so before the
    figure is read as the step's."""
    a = run(str(NSYS_PROBE))
    d = to_dict(a)
    jsonschema.validate(d, json.loads(SCHEMA_PATH.read_text()))
    e = d["efficiency"]
    assert e["mfu_lower_bound"] is True and e["flops_coverage"] < 0.995
    cover = f"{e['flops_coverage']:.0%}"
    assert e["mfu_text"] == f"MFU >= {e['mfu']:.1%} (shapes cover {cover} of GEMM/attention time)"
    assert [u["category"] for u in e["uncovered"]] == ["attention"]
    line = efficiency_line(build_report(a))
    assert line.startswith(f"MFU >= {e['mfu']:.0%} of H100 SXM fp16/bf16 989 TFLOP/s (shapes "
                           f"cover {cover} of GEMM/attention time)"), line
    html = re.sub(r"\s+", " ", render_html(a))
    assert f"MFU <b>&ge; {e['mfu']:.1%}</b>" in html
    assert f"a lower bound, shapes cover {cover} of GEMM and attention time; not counted: " in html
    # a full count says nothing of the kind
    full = to_dict(run(str(NANOGPT)))["efficiency"]
    assert full["mfu_lower_bound"] is False and full["uncovered"] == []
    html = re.sub(r"\s+", " ", render_html(run(str(NANOGPT))))
    assert "MFU <b>&ge;" not in html and "a lower bound, shapes cover" not in html
