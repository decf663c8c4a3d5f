"""Which framework drives the training loop, so each fix can use that framework's own knob.

A fix the user cannot paste is no fix: a Hugging Face Trainer user turns on bf16 with
``TrainingArguments(bf16=True)``, a Lightning user with ``Trainer(precision="bf16-mixed")``,
not with ``torch.autocast``. The answer comes, most telling first, from:

1. under `advisor profile`, the packages on the stack of the first ``optimizer.step()`` (who
   runs the loop), then the framework packages the script imported (`advisor.engine.host`);
2. the trace: Python frames (torch.profiler ``with_stack``: ``transformers/trainer.py(...)``,
   ``lightning/pytorch/loops/...``), and ranges the frameworks emit themselves (Lightning's
   profiler ``[LightningModule]...``/``[Strategy]...``, DeepSpeed's NVTX ``DeepSpeedEngine...``).

Trainers that run on top of others come first: the HF Trainer runs on accelerate (and
DeepSpeed when configured), Lightning may use DeepSpeed as a strategy; their knobs are the
trainer's. Plain PyTorch is the answer when nothing says otherwise. ``torch.compile`` and CUDA
graph use are recorded as markers beside the framework (from ``Torch-Compiled Region`` /
``CompiledFunction`` ranges, Triton kernels, ``cudaGraphLaunch``, graph-replayed kernels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.engine.host import HostFacts
from advisor.graph.model import OpGraph, RangeSource

PRECEDENCE = ("lightning", "hf-trainer", "deepspeed", "accelerate")
"""Most specific first: a framework running on top of another owns the knobs."""

LABELS = {"pytorch": "plain PyTorch", "hf-trainer": "Hugging Face Trainer",
          "lightning": "PyTorch Lightning", "accelerate": "Hugging Face accelerate",
          "deepspeed": "DeepSpeed"}

MODULES = {
    "lightning": ("lightning.pytorch", "pytorch_lightning", "lightning"),
    "hf-trainer": ("transformers.trainer",),
    "deepspeed": ("deepspeed",),
    "accelerate": ("accelerate",),
}
"""Imported packages (``sys.modules`` names) that mean a framework; ``transformers`` alone is
model code, not the Trainer."""

# Python frames (Kineto with_stack: "path/to/file.py(123): function") and range names.
FRAME_PATTERNS = {
    "lightning": re.compile(r"(?:^|/)(?:lightning/pytorch|pytorch_lightning)/"),
    "hf-trainer": re.compile(r"(?:^|/)transformers/trainer(?:_utils|_pt_utils)?\.py\("),
    "deepspeed": re.compile(r"(?:^|/)deepspeed/runtime/"),
    "accelerate": re.compile(r"(?:^|/)accelerate/(?:accelerator|optimizer|data_loader)\.py\("),
}
RANGE_PATTERNS = {
    # Lightning's profilers: "[pl][profile][Strategy]SingleDeviceStrategy.training_step"
    # (2.x), "[LightningModule]Model.training_step" (1.x), "[pl][module]..." (module ranges)
    "lightning": re.compile(r"^(?:\[pl\]\[(?:profile|module)\]|\[(?:LightningModule|Strategy|"
                            r"_TrainingEpochLoop|Callback|LightningDataModule)\])"),
    "deepspeed": re.compile(r"^DeepSpeed(?:Engine|ZeroOptimizer\w*)\."),
}
COMPILED_RANGE = re.compile(r"^(?:Torch-Compiled Region|CompiledFunction|TorchDynamo Cache Lookup)")
TRITON_KERNEL = re.compile(r"^triton_")
MAX_RANGES = 400_000
"""Ranges read for evidence: the window's first ones say as much as all of them."""


@dataclass(frozen=True)
class FrameworkInfo:
    name: str  # one of `advisor.engine.rule.FRAMEWORKS`
    evidence: tuple[str, ...]  # what said so, in words; empty for the plain-PyTorch default
    source: str  # "script" (advisor profile), "trace", or "default"
    compiled: bool = False  # torch.compile regions in the trace
    cuda_graphs: bool = False  # CUDA graph replays in the trace
    markers: tuple[str, ...] = ()  # evidence for compiled / cuda_graphs

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)

    def describe(self) -> str:
        how = f" ({'; '.join(self.evidence)})" if self.evidence else " (no framework seen)"
        extra = [m for m, on in (("torch.compile", self.compiled), ("CUDA graphs", self.cuda_graphs))
                 if on]
        return self.label + how + (f"; uses {', '.join(extra)}" if extra else "")


def _from_facts(facts: HostFacts) -> tuple[str, tuple[str, ...]] | None:
    loop = set(facts.loop_modules)
    for name in PRECEDENCE:
        hit = [m for m in MODULES[name] if m in loop]
        if hit:
            return name, (f"optimizer.step() is called from {hit[0]}",)
    imported = set(facts.modules)
    for name in PRECEDENCE:
        hit = [m for m in MODULES[name] if m in imported]
        if hit:
            return name, (f"the script imported {hit[0]}",)
    return None


def _from_trace(graph: OpGraph) -> tuple[tuple[str, tuple[str, ...]] | None, bool, bool,
                                         tuple[str, ...]]:
    counts: dict[str, int] = {}
    example: dict[str, str] = {}
    compiled = ""
    seen: dict[tuple[str, bool], tuple[str, ...]] = {}  # a trace repeats its names: test each once
    for r in graph.ranges[:MAX_RANGES]:
        name = r.name
        python = r.source is RangeSource.PYTHON
        hits = seen.get((name, python))
        if hits is None:
            patterns = FRAME_PATTERNS if python else RANGE_PATTERNS
            hits = seen[(name, python)] = tuple(fw for fw, pat in patterns.items()
                                               if pat.search(name))
        for fw in hits:
            counts[fw] = counts.get(fw, 0) + 1
            example.setdefault(fw, name)
        if not compiled and r.source is not RangeSource.PYTHON and COMPILED_RANGE.match(name):
            compiled = f"{name.split(':')[0]} ranges"
    if not compiled and any(TRITON_KERNEL.match(o.name) for o in graph.gpu_ops[:20_000]):
        compiled = "Triton (Inductor) kernels"
    graphs = ""
    if any(o.graph_id is not None for o in graph.gpu_ops[:50_000]):
        graphs = "kernels replayed from CUDA graphs"
    elif any(a.name.startswith("cudaGraphLaunch") for a in graph.api_calls[:200_000]):
        graphs = "cudaGraphLaunch calls"
    markers = tuple(m for m in (compiled, graphs) if m)
    found = None
    for fw in PRECEDENCE:
        if counts.get(fw):
            found = (fw, (f"{counts[fw]} trace events such as {example[fw][:80]!r}",))
            break
    return found, bool(compiled), bool(graphs), markers


def detect(graph: OpGraph, facts: HostFacts | None = None) -> FrameworkInfo:
    traced, compiled, graphs, markers = _from_trace(graph)
    scripted = _from_facts(facts) if facts is not None else None
    if scripted is not None:
        name, evidence = scripted
        if traced is not None and traced[0] == name:
            evidence = evidence + traced[1]
        return FrameworkInfo(name, evidence, "script", compiled, graphs, markers)
    if traced is not None:
        return FrameworkInfo(traced[0], traced[1], "trace", compiled, graphs, markers)
    evidence = ("the script imported no framework",) if facts is not None and (
        facts.modules or facts.loop_modules or facts.cores) else ()
    return FrameworkInfo("pytorch", evidence, "script" if evidence else "default", compiled,
                         graphs, markers)
