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
DeepSpeed when configured), Lightning may use DeepSpeed or FSDP as a strategy; their knobs are
the trainer's. FSDP (``FSDP::pre_forward`` ranges, ``torch/distributed/fsdp`` frames) is
PyTorch's own sharding: named, with plain PyTorch's fixes.

What the trace cannot say is not guessed:

* **plain PyTorch** needs evidence too: the script imported no framework (`advisor profile`),
  or the trace's Python frames show the loop and no framework in it;
* **unknown** (PyTorch, but neither frames nor a session say who runs the loop; a bare nsys
  capture): each fix gives the knob of plain PyTorch, the HF Trainer / accelerate and
  Lightning side by side (`advisor.engine.context.RuleContext.fix`), since a wrong one
  (``torch.autocast`` to a Lightning user who needs ``precision="bf16-mixed"``) is no fix;
* **no PyTorch** (no aten operators, no torch frames, no ATen kernels, no Python process, no
  session: a CUDA C++ application): the findings keep their evidence and say the fix is in the application's
  code, with no PyTorch snippet. ``torch.compile`` and CUDA
graph use are recorded as markers beside the framework (from ``Torch-Compiled Region`` /
``CompiledFunction`` ranges, Triton kernels, ``cudaGraphLaunch``, graph-replayed kernels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from advisor.engine.host import HostFacts
from advisor.graph.model import OpGraph, RangeSource
from advisor.graph.op_names import operator_name

FRAMEWORKS = ("pytorch", "hf-trainer", "lightning", "accelerate", "deepspeed")
"""Frameworks a fix can be written for (`Rule.fixes`; this module detects which one a trace or a
script uses). "pytorch" is the plain-PyTorch fallback every mechanism must have."""

PRECEDENCE = ("lightning", "hf-trainer", "deepspeed", "accelerate", "fsdp")
"""Most specific first: a framework running on top of another owns the knobs."""

LABELS = {"pytorch": "plain PyTorch", "hf-trainer": "Hugging Face Trainer",
          "lightning": "PyTorch Lightning", "accelerate": "Hugging Face accelerate",
          "deepspeed": "DeepSpeed", "fsdp": "PyTorch FSDP",
          "unknown": "framework not known", "none": "no PyTorch in the trace"}
UNKNOWN = "unknown"
"""PyTorch runs, but nothing says whether a framework runs the loop."""
NO_PYTORCH = "none"
"""The trace shows no PyTorch at all: the application's own code."""

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
    "fsdp": re.compile(r"(?:^|/)torch/distributed/(?:fsdp|_composable/fsdp)/"),
}
RANGE_PATTERNS = {
    # Lightning's profilers: "[pl][profile][Strategy]SingleDeviceStrategy.training_step"
    # (2.x), "[LightningModule]Model.training_step" (1.x), "[pl][module]..." (module ranges)
    "lightning": re.compile(r"^(?:\[pl\]\[(?:profile|module)\]|\[(?:LightningModule|Strategy|"
                            r"_TrainingEpochLoop|Callback|LightningDataModule)\])"),
    "deepspeed": re.compile(r"^DeepSpeed(?:Engine|ZeroOptimizer\w*)\."),
    # FSDP1 and FSDP2 record_function ranges: "FSDP::pre_forward (blocks.3)",
    # "FSDP::all_gather_copy_in", "FullyShardedDataParallel.forward"
    "fsdp": re.compile(r"^(?:FSDP::|FullyShardedDataParallel\.)"),
}
ATEN_KERNEL = re.compile(r"\bat::(?:native|cuda)\b|\bat_cuda_detail\b|\bc10::")
TORCH_FRAME = re.compile(r"(?:^|/)torch/")
PYTHON_PROCESS = re.compile(r"(?:^|/)(?:python[\d.]*|pytest|torchrun|accelerate|deepspeed)$")
"""A process that runs Python (or a PyTorch launcher): a CUDA-graph replay of a PyTorch step
shows no operator or kernel name, but its process is still the Python interpreter."""
COMPILED_RANGE = re.compile(r"^(?:Torch-Compiled Region|CompiledFunction|TorchDynamo Cache Lookup)")
TRITON_KERNEL = re.compile(r"^triton_")
MAX_RANGES = 400_000
"""Ranges read for evidence: the window's first ones say as much as all of them."""


@dataclass(frozen=True)
class FrameworkInfo:
    name: str  # one of `FRAMEWORKS`
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
        if self.name == UNKNOWN:
            how += (": each fix gives the knob of plain PyTorch, the HF Trainer / accelerate "
                    "and Lightning")
        elif self.name == NO_PYTORCH:
            how += ": the fixes are for the application's own code"
        extra = [m for m, on in (("torch.compile", self.compiled), ("CUDA graphs", self.cuda_graphs))
                 if on]
        return self.label + how + (f"; uses {', '.join(extra)}" if extra else "")


@lru_cache(maxsize=65536)  # pure in the name; a window repeats few kernel names (issue #39)
def _aten_kernel(name: str) -> bool:
    """A kernel of PyTorch's own (ATen, c10), by its name."""
    return ATEN_KERNEL.search(name) is not None


def _from_facts(facts: HostFacts) -> tuple[str, tuple[str, ...]] | None:
    loop = set(facts.loop_modules)
    for name in PRECEDENCE:
        hit = [m for m in MODULES.get(name, ()) if m in loop]
        if hit:
            return name, (f"optimizer.step() is called from {hit[0]}",)
    imported = set(facts.modules)
    for name in PRECEDENCE:
        hit = [m for m in MODULES.get(name, ()) if m in imported]
        if hit:
            return name, (f"the script imported {hit[0]}",)
    return None


@dataclass(frozen=True)
class TraceEvidence:
    """What the trace alone says about the code that ran."""

    found: tuple[str, tuple[str, ...]] | None  # a framework and the events that say so
    compiled: bool
    graphs: bool
    markers: tuple[str, ...]
    pytorch: str  # what shows PyTorch (or Python) ran, as a clause; "" when nothing does
    frames: bool  # Python frames of torch code recorded (with_stack): the loop is visible


def _from_trace(graph: OpGraph) -> TraceEvidence:
    counts: dict[str, int] = {}
    example: dict[str, str] = {}
    compiled = ""
    operators = torch_frames = 0
    # a trace repeats its names: each (name, is a Python frame) is tested once, for the
    # frameworks' patterns, a torch frame and a compiled region (a 200,000-frame trace spent
    # a quarter of a second re-running the last two per range)
    seen: dict[tuple[str, bool], tuple[tuple[str, ...], bool, bool]] = {}
    for r in graph.ranges[:MAX_RANGES]:
        name = r.name
        python = r.source is RangeSource.PYTHON
        tested = seen.get((name, python))
        if tested is None:
            patterns = FRAME_PATTERNS if python else RANGE_PATTERNS
            tested = seen[(name, python)] = (
                tuple(fw for fw, pat in patterns.items() if pat.search(name)),
                python and TORCH_FRAME.search(name) is not None,
                not python and COMPILED_RANGE.match(name) is not None)
        hits, torch_frame, compiled_range = tested
        for fw in hits:
            counts[fw] = counts.get(fw, 0) + 1
            example.setdefault(fw, operator_name(name))
        if python:
            torch_frames += torch_frame
        elif r.source is RangeSource.OPERATOR or name.startswith("aten::"):
            operators += 1
        if not compiled and compiled_range:
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
    aten_kernels = sum(1 for o in graph.gpu_ops[:50_000] if _aten_kernel(o.name))
    seen = ", ".join(f"{n} {what}" for n, what in (
        (operators, "aten operators"), (torch_frames, "torch frames"),
        (aten_kernels, "ATen kernels")) if n)
    pytorch = f"PyTorch ran ({seen})" if seen else ""
    if not pytorch:
        python = sorted({n for n in graph.info.processes.values() if PYTHON_PROCESS.search(n)})
        if python:
            pytorch = f"a Python process ({python[0]!r}) ran the GPU work"
    return TraceEvidence(found, bool(compiled), bool(graphs), markers, pytorch,
                         torch_frames > 0)


def detect(graph: OpGraph, facts: HostFacts | None = None) -> FrameworkInfo:
    """The framework running the loop, from the session's record, then the trace (module
    docstring); ``unknown`` and ``none`` where neither says."""
    t = _from_trace(graph)
    compiled, graphs, markers = t.compiled, t.graphs, t.markers
    scripted = _from_facts(facts) if facts is not None else None
    if scripted is not None:
        name, evidence = scripted
        if t.found is not None and t.found[0] == name:
            evidence = evidence + t.found[1]
        return FrameworkInfo(name, evidence, "script", compiled, graphs, markers)
    if t.found is not None:
        return FrameworkInfo(t.found[0], t.found[1], "trace", compiled, graphs, markers)
    if facts is not None and (facts.modules or facts.loop_modules or facts.cores):
        return FrameworkInfo("pytorch", ("the script imported no framework",), "script",
                             compiled, graphs, markers)
    if t.frames:
        return FrameworkInfo("pytorch", ("the trace's Python frames show the loop, and no "
                                         "framework in it",), "trace", compiled, graphs, markers)
    if t.pytorch:
        return FrameworkInfo(UNKNOWN, (f"{t.pytorch}, but no Python frames or framework "
                                       "ranges say who runs the loop",), "default",
                             compiled, graphs, markers)
    return FrameworkInfo(NO_PYTORCH, ("no aten operators, torch frames, ATen kernels or Python "
                                      "process in the trace",), "trace", compiled, graphs,
                         markers)
