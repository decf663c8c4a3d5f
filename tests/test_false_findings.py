"""Each rule fires on evidence of its mechanism, and each what-if removes only what its fix
removes: checked on real traces and on temp copies of them with names changed to what other
GPUs, libraries and frameworks emit (the originals are never modified)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.engine.context import RuleContext, analysed_steps
from advisor.engine.effects import CaptureGraph, DropOps, RemoveWaits, SetOpDurations, merge
from advisor.graph.kernels import KernelCategory, classify
from advisor.graph.queries import graphable_regions, inside
from advisor.ingest.base import load_trace
from tests.conftest import SCENARIOS, SHARED_TRACES

FORMATS = ("nsys.sqlite.gz", "trace.json.gz")


def _copy(src: Path, dst_dir: Path) -> Path:
    """An editable copy: Kineto JSON as JSON, nsys exports as a plain SQLite file."""
    if src.name.endswith(".json.gz"):
        out = dst_dir / src.name
        shutil.copy(src, out)
        return out
    out = dst_dir / src.name.removesuffix(".gz")
    with gzip.open(src) as a, out.open("wb") as b:
        shutil.copyfileobj(a, b)
    return out


def rename_kernels(src: Path, dst_dir: Path, prefix: str, new: str) -> Path:
    """Every kernel whose name starts with ``prefix`` renamed to ``new``."""
    out = _copy(src, dst_dir)
    if out.name.endswith(".json.gz"):
        with gzip.open(out) as f:
            data = json.loads(f.read())
        for e in data["traceEvents"]:
            if e.get("cat") == "kernel" and str(e.get("name", "")).startswith(prefix):
                e["name"] = new
        with gzip.open(out, "wt") as f:
            json.dump(data, f)
        return out
    con = sqlite3.connect(out)
    con.execute("UPDATE StringIds SET value = ? WHERE value LIKE ?", (new, prefix + "%"))
    con.commit()
    con.close()
    return out


def rename_ranges(src: Path, dst_dir: Path, old: str, new: str) -> Path:
    """Every NVTX / record_function range named ``old`` renamed to ``new``."""
    out = _copy(src, dst_dir)
    if out.name.endswith(".json.gz"):
        with gzip.open(out) as f:
            data = json.loads(f.read())
        for e in data["traceEvents"]:
            if e.get("name") == old:
                e["name"] = new
        with gzip.open(out, "wt") as f:
            json.dump(data, f)
        return out
    con = sqlite3.connect(out)
    con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = ?", (new, old))
    con.execute("UPDATE StringIds SET value = ? WHERE value = ?", (new, old))
    con.commit()
    con.close()
    return out


def rules_raised(path: Path) -> dict[str, float]:
    return {f.rule: f.estimate.speedup for f in analyze(path).results.findings}


# ----- kernel datatype: BF16 GEMMs under other GPUs' and libraries' names ---------------------

HALF_NAMES = [
    "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",  # cuBLAS, A100
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
    "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn",  # cuBLAS, V100
    "turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn",  # cuBLAS, T4
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)",
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", HALF_NAMES, ids=[n[:34] for n in HALF_NAMES])
def test_bf16_gemms_renamed_to_other_gpus_names_do_not_raise_fp32_matmul(tmp_path, name, fmt):
    # the unfused-gemm-gelu fix runs its MLP's GEMMs in BF16 (nvjet_sm90_tst_*) on an H100
    src = SCENARIOS / "unfused-gemm-gelu" / "good" / fmt
    renamed = rename_kernels(src, tmp_path, "nvjet_sm90_tst_", name)
    graph = load_trace(renamed)
    gemms = [o for o in graph.kernels() if o.name == name]
    assert gemms, "the rename reached no kernel"
    assert all(classify(o) is KernelCategory.GEMM for o in gemms)
    result = analyze(renamed).results
    assert "fp32-matmul" not in [f.rule for f in result.findings + result.below_threshold]


@pytest.mark.parametrize("fmt", FORMATS)
def test_fp32_gemms_under_an_a100_name_still_raise_fp32_matmul(tmp_path, fmt):
    src = SCENARIOS / "fp32-matmul" / "bad" / fmt
    renamed = rename_kernels(src, tmp_path, "sm80_xmma_gemm_f32f32", "ampere_sgemm_128x64_nn")
    assert "fp32-matmul" in rules_raised(renamed)


# ----- unfused-attention needs QK^T -> softmax -> PV ------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_an_lm_head_gemm_log_softmax_nll_gemm_is_not_attention(fmt):
    result = analyze(SCENARIOS / "pageable-memcpy" / "good" / fmt).results
    assert "unfused-attention" not in [f.rule for f in result.findings + result.below_threshold]


def test_real_eager_attention_is_still_found():
    rel = "tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
    assert "unfused-attention" in rules_raised(SHARED_TRACES / rel)


# ----- cpu-bound-loss needs GPU idle in the loss caused by the host ---------------------------

HEALTHY_WITH_HF_RANGES = [(s, f) for s in ("host-sync", "fp8-candidate", "unfused-gemm-gelu")
                          for f in FORMATS]


@pytest.mark.parametrize(("scenario", "fmt"), HEALTHY_WITH_HF_RANGES)
def test_an_hf_compute_loss_range_around_the_forward_is_not_a_cpu_bound_loss(tmp_path, scenario, fmt):
    # HF Trainer's compute_loss runs the model's forward and the loss: the range holds most of
    # the step, with the forward's repeated layer kernels, and no host work stalls the GPU
    renamed = rename_ranges(SCENARIOS / scenario / "good" / fmt, tmp_path, "forward", "compute_loss")
    graph = load_trace(renamed)
    assert any("loss" in s.phases for s in graph.steady_steps)
    assert "cpu-bound-loss" not in rules_raised(renamed)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_host_bound_loss_under_an_hf_name_is_still_found(tmp_path, fmt):
    renamed = rename_ranges(SCENARIOS / "cpu-bound-loss" / "bad" / fmt, tmp_path, "loss",
                            "compute_loss")
    found = [f for f in analyze(renamed).results.findings if f.rule == "cpu-bound-loss"]
    assert found and found[0].evidence.quantities["loss_gpu_idle_share"] >= 0.10


# ----- uncaptured-cuda-graph: launch gaps, enough steps; the what-if keeps host compute -------

@pytest.mark.parametrize("rel", [
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # one step
    "tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",  # one step
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # two steps
])
def test_too_few_steady_steps_raise_no_cuda_graph_finding(rel):
    assert len(analysed_steps(load_trace(SHARED_TRACES / rel))) < 3
    assert "uncaptured-cuda-graph" not in rules_raised(SHARED_TRACES / rel)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_launch_bound_step_reports_its_launch_gap_idle(fmt):
    found = [f for f in analyze(SCENARIOS / "uncaptured-cuda-graph" / "bad" / fmt).results.findings
             if f.rule == "uncaptured-cuda-graph"]
    assert found and found[0].evidence.quantities["launch_gap_idle_share"] >= 0.10


def test_a_graph_replay_keeps_cpu_operators_and_input_copies():
    # MI250 toy: CPU work between launches (host-side operators that launch nothing)
    graph = load_trace(SHARED_TRACES / "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    ctx = RuleContext(graph, analysed_steps(graph))
    sim = ctx.simulation()
    host = [sum(max(0, min(s.cpu_end_ns, b) - max(s.cpu_start_ns, a))
                for a, b in sim._host_compute_spans) for s in ctx.steps]
    assert sum(host) > 0, "this trace has CPU operators inside its steps"
    after = ctx.replay([CaptureGraph(tuple(graphable_regions(ctx.steps)))])
    for period, cpu in zip(after.periods, host, strict=True):
        assert period >= cpu  # what the CPU computes is not replayed by a graph


def test_data_phases_stay_out_of_the_graph_wherever_they_sit_in_the_step():
    # torch.profiler's ProfilerStep range opens before the "data" record_function: the old
    # "within 1 ns of the step start" test left every data phase inside the graph
    graph = load_trace(SCENARIOS / "loader-jitter" / "bad" / "trace.json.gz")
    steps = analysed_steps(graph)
    regions = graphable_regions(steps)
    data = [span for s in steps for span in s.phases.get("data", [])]
    assert data and any(a > s.cpu_start_ns for s in steps for a, _ in s.phases.get("data", []))
    for a, b in data:
        assert not any(ra < b and a < rb for ra, rb in regions)
    for s in steps:  # the rest of the step is graphed
        covered = sum(min(b, s.cpu_end_ns) - max(a, s.cpu_start_ns) for a, b in regions
                      if a < s.cpu_end_ns and b > s.cpu_start_ns)
        in_data = sum(b - a for a, b in s.phases.get("data", []))
        assert covered + in_data >= 0.99 * (s.cpu_end_ns - s.cpu_start_ns)
        assert not inside(s.cpu_start_ns - 1, regions)


# ----- the combined estimate -----------------------------------------------------------------

COMBINED_CASES = [(r.name, f) for r in sorted(SCENARIOS.iterdir()) if r.is_dir() for f in FORMATS
                  if (r / "bad" / f).exists()]  # gemm-shape-alignment keeps no nsys export


@pytest.mark.parametrize(("scenario", "fmt"), COMBINED_CASES)
def test_all_fixes_together_are_never_below_the_best_single_fix(scenario, fmt):
    result = analyze(SCENARIOS / scenario / "bad" / fmt).results
    assert result.findings
    c = result.combined
    # the priced findings: one withheld on its own (fp8-candidate without shapes) is left out
    priced = [f for f in result.findings if f.estimate.withheld == result.basis.withheld]
    assert c.speedup >= max(f.estimate.speedup for f in priced) - 1e-9
    assert c.low <= c.speedup <= c.high
    assert c.low >= max(f.estimate.low for f in priced) - 1e-9


def test_overlapping_effects_are_counted_once():
    a = [DropOps((1, 2), 0.25), RemoveWaits((7,)), SetOpDurations(((3, 100),)),
         CaptureGraph(((0, 10),))]
    b = [DropOps((1,), 0.25), RemoveWaits((7, 8)), SetOpDurations(((3, 50),)),
         CaptureGraph(((0, 10),), launch_ns=20_000)]
    merged = merge(a + b)
    drops = [e for e in merged if isinstance(e, DropOps)]
    assert drops == [DropOps((1, 2), 0.25)]  # 25% kept once, not 6%
    assert [e for e in merged if isinstance(e, RemoveWaits)] == [RemoveWaits((7, 8))]
    assert [e for e in merged if isinstance(e, SetOpDurations)] == [SetOpDurations(((3, 50),))]
    assert len([e for e in merged if isinstance(e, CaptureGraph)]) == 1


# ----- a name without a datatype: the launching operator's recorded dtypes decide ------------

@pytest.mark.parametrize(("scenario", "prefix", "want"), [
    ("unfused-gemm-gelu/good", "nvjet_sm90_tst_", "fp16/bf16"),
    ("fp32-matmul/bad", "sm80_xmma_gemm_f32f32", "fp32"),
])
def test_an_inductor_template_gemm_takes_its_dtype_from_the_launching_op(tmp_path, scenario,
                                                                         prefix, want):
    from advisor.graph.kernels import gemm_precision, launching_op, op_precision

    name = "triton_tem_fused_addmm_0"  # Inductor's template GEMM: no dtype in the name
    renamed = rename_kernels(SCENARIOS / scenario / "trace.json.gz", tmp_path, prefix, name)
    graph = load_trace(renamed)
    # (kernels whose launch precedes the profiler's window have no launching call to read)
    gemms = [o for o in graph.kernels() if o.name == name and graph.launcher(o) is not None]
    assert gemms and gemm_precision(name) == "unknown"
    assert all(classify(o) is KernelCategory.GEMM for o in gemms)
    assert all(launching_op(graph, o).dtypes for o in gemms)  # record_shapes=True
    assert {op_precision(graph, o) for o in gemms} == {want}
    assert ("fp32-matmul" in rules_raised(renamed)) == (want == "fp32")
