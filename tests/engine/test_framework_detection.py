"""Which framework runs the loop, from the trace or from what `advisor profile` recorded.

`fixtures/frameworks/`: `benchmarks/frameworks/hf_trainer_tiny.py` and `lightning_tiny.py` (a
small HF Trainer and Lightning run, CPU) recorded as a user would (torch.profiler with Python
stacks; Lightning's own PyTorchProfiler) and under `advisor profile` (``*-capture.json``: the
session's record, with the packages on the stack of the first ``optimizer.step()``).
The Lightning ViT-B capture (`fixtures/public/lightning-vit-b`, H100, FP32, measured
``--trainer.precision 32-true`` -> ``bf16-mixed``) carries no framework evidence by itself: the
fix names Lightning's knob once the session says Lightning runs the loop.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.analysis import analyze_graph
from advisor.engine.framework import detect
from advisor.engine.host import HostFacts
from advisor.ingest.base import load_trace
from tests.conftest import shared

ROOT = Path(__file__).resolve().parents[2]
FW = ROOT / "fixtures" / "frameworks"


def _facts(name: str) -> HostFacts:
    return HostFacts.from_state(json.loads((FW / name).read_text()))


def test_the_hf_trainer_is_read_from_python_frames():
    fw = detect(load_trace(FW / "hf-trainer-stack.json.gz"))
    assert fw.name == "hf-trainer" and fw.source == "trace"
    assert "transformers/trainer" in fw.evidence[0]


def test_lightning_is_read_from_its_profiler_ranges():
    fw = detect(load_trace(FW / "lightning-profiler.json.gz"))
    assert fw.name == "lightning" and fw.source == "trace"
    assert "[pl][profile]" in fw.evidence[0]


@pytest.mark.parametrize(("capture", "name", "package"), [
    ("hf-trainer-capture.json", "hf-trainer", "transformers.trainer"),
    ("lightning-capture.json", "lightning", "lightning.pytorch"),
])
def test_the_session_names_who_calls_optimizer_step(capture, name, package):
    facts = _facts(capture)
    assert package in facts.loop_modules
    fw = detect(load_trace(ROOT / "fixtures" / "public" / "nanogpt" / "trace.json.gz"), facts)
    assert fw.name == name and fw.source == "script"
    assert f"optimizer.step() is called from {package}" in fw.evidence


def test_imports_alone_do_not_outrank_the_loop():
    """The Lightning script imported transformers too (through its dependencies): the stack of
    optimizer.step() decides, not the import list."""
    facts = _facts("lightning-capture.json")
    assert "transformers" in facts.modules
    assert detect(load_trace(FW / "lightning-profiler.json.gz"), facts).name == "lightning"


@pytest.fixture(scope="module")
def lightning_vit():
    return load_trace(ROOT / "fixtures" / "public" / "lightning-vit-b" / "trace.json.gz")


def test_lightning_fp32_gets_the_precision_knob(lightning_vit):
    r = analyze_graph(lightning_vit, facts=_facts("lightning-capture.json")).results
    (f,) = [x for x in r.findings if x.rule == "fp32-matmul"]
    assert f.fix.framework == "lightning" and f.fix.mechanism == "fp32-gemms"
    assert 'precision="bf16-mixed"' in f.fix.title and 'precision="bf16-mixed"' in f.fix.snippet
    assert "autocast" not in f.fix.snippet
    assert r.framework.name == "lightning"


def test_without_evidence_the_fix_gives_each_frameworks_knob(lightning_vit):
    """The Lightning ViT's trace alone (no Python frames, no Lightning ranges) cannot say who
    runs the loop: a plain ``torch.autocast`` would be the wrong fix for its Lightning user
    (issue 33), so the fix gives plain PyTorch's, the HF Trainer's, accelerate's and
    Lightning's knobs side by side."""
    r = analyze_graph(lightning_vit).results
    (f,) = [x for x in r.findings if x.rule == "fp32-matmul"]
    assert r.framework.name == "unknown" and r.framework.source == "default"
    assert "aten operators" in r.framework.evidence[0]
    assert f.fix.framework == "unknown" and "torch.autocast" in f.fix.snippet
    assert 'precision="bf16-mixed"' in f.fix.snippet
    assert "TrainingArguments(" in f.fix.snippet and "bf16=True" in f.fix.snippet
    assert 'mixed_precision="bf16"' in f.fix.snippet


def test_hf_trainer_fp32_gets_training_arguments(lightning_vit):
    """The same FP32 step, were the HF Trainer running it: its knob, TrainingArguments(bf16=True)."""
    r = analyze_graph(lightning_vit, facts=_facts("hf-trainer-capture.json")).results
    (f,) = [x for x in r.findings if x.rule == "fp32-matmul"]
    assert f.fix.framework == "hf-trainer" and "TrainingArguments(bf16=True)" in f.fix.title
    compile_fix = [x for x in r.findings if x.rule == "compiler-fusion"]
    assert all("torch_compile=True" in x.fix.snippet for x in compile_fix)


@pytest.mark.parametrize("trace", ["nsys-ai/mfu_2gpu_before.sqlite",
                                   "nsys-ai/h100_2gpu_1s.sqlite"])
def test_fsdp_is_read_from_its_ranges(trace):
    """nsys-ai's 2x H100 captures wrap their blocks in FSDP (``FSDP::pre_forward (blocks.3...),
    op_id = N`` NVTX ranges): labelled FSDP (was "plain PyTorch (no framework seen)"), the
    evidence without the per-call counters; fixes are plain PyTorch's."""
    fw = detect(load_trace(shared(trace)))
    assert fw.name == "fsdp" and fw.label == "PyTorch FSDP" and fw.source == "trace"
    assert "FSDP::" in fw.evidence[0] and "op_id" not in fw.evidence[0]


@pytest.mark.parametrize("trace", ["pipit/perlmutter-cloverleaf-cuda.sqlite",
                                   "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"])
def test_a_cuda_application_without_pytorch_gets_no_pytorch_fix(trace):
    """CloverLeaf (CUDA C++ hydrodynamics) and an MPI saxpy: no aten operators, torch frames
    or ATen kernels. The findings keep their evidence; the fix says the change is in the
    application's code and carries no PyTorch snippet."""
    graph = load_trace(shared(trace))
    assert detect(graph).name == "none"
    r = analyze_graph(graph).results
    assert r.framework.name == "none"
    for f in r.findings:
        assert f.evidence.steps and f.fix.framework == "none"
        assert "application's own code" in f.fix.title
        assert not any(word in f.fix.title + f.fix.snippet
                       for word in ("torch", "DataLoader", "non_blocking", "autocast"))
    if "cloverleaf" in trace:
        assert {f.rule for f in r.findings} >= {"host-sync", "pageable-memcpy"}


def test_python_frames_without_a_framework_are_plain_pytorch():
    """nanoGPT recorded with stacks: the loop's frames are visible and no framework is in
    them, so plain PyTorch is known, not assumed."""
    fw = detect(load_trace(ROOT / "fixtures/source-lines/traces/nanogpt/trace_rank0.json.gz"))
    assert fw.name == "pytorch" and fw.source == "trace" and "Python frames" in fw.evidence[0]


def test_a_cuda_graph_replay_of_a_pytorch_step_is_not_taken_for_a_cuda_application():
    """The cpu-bound-loss scenario's fixed step replays one CUDA graph per step under nsys:
    no operator ranges, no kernel names (graph rows), but its process is the Python
    interpreter. The framework is unknown, not "no PyTorch"."""
    fw = detect(load_trace(ROOT / "fixtures/scenarios/cpu-bound-loss/good/nsys.sqlite.gz"))
    assert fw.name == "unknown" and "Python process" in fw.evidence[0]
