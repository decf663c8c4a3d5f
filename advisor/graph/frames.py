"""Which Python frames are the user's own code, and what to call a frame.

torch.profiler's ``with_stack`` records every Python call as a ``python_function`` range named
``FILE(LINE): FUNCTION`` (FILE relative to the ``sys.path`` entry it was found under, so the
script's own files read ``train.py``, ``model.py``) and every call of a built-in as
``<built-in method item of Tensor object at 0x...>``. A frame is *library* code when it belongs
to Python itself (the standard library, ``<frozen ...>``, built-ins), to an installed package
(a ``site-packages``/``dist-packages`` path) or to a well-known framework (torch, transformers,
Lightning, timm, ... and advisor itself); everything else is the user's. The list of frameworks
is written out here rather than read from the analysing machine's installed packages, because a
trace is often analysed on another machine than the one that recorded it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache

from advisor.graph.op_names import operator_name

_FRAMEWORK_NAMES = """
torch torchvision torchaudio torchtext torchdata torchrec torchao functorch triton numpy scipy
pandas PIL cv2 sklearn matplotlib transformers accelerate datasets tokenizers huggingface_hub
safetensors peft trl diffusers evaluate lightning pytorch_lightning lightning_fabric
lightning_utilities torchmetrics timm deepspeed apex megatron fairscale xformers flash_attn
einops tqdm wandb tensorboard tensorboardX mlflow hydra omegaconf yaml click jinja2 rich nvtx
tiktoken sentencepiece regex packaging typing_extensions importlib_metadata filelock fsspec
sympy networkx jax jaxlib optree advisor _pytest pytest pluggy setuptools pkg_resources six
attr attrs pydantic dill cloudpickle psutil h5py albumentations google absl ray dask
distributed submitit opt_einsum onnx onnxruntime bitsandbytes liger_kernel torch_xla
"""
FRAMEWORKS = frozenset(_FRAMEWORK_NAMES.split())
"""Top-level packages whose frames are library code wherever they were imported from."""

_PY_FRAME = re.compile(r"^(.+)\((\d+)\): (.+)$")
_BUILTIN_METHOD = re.compile(r"^<built-in method (\S*) of (\S+) object at 0x[0-9a-fA-F]+>$")
_BUILTIN_FUNCTION = re.compile(r"^<built-in (?:function|method) (\S+)>$")
_INSTALLED = ("/site-packages/", "/dist-packages/")


@dataclass(frozen=True, slots=True)
class Frame:
    """A Python function as the trace names it (``line``: where the profiler saw it start)."""

    file: str
    line: int
    function: str


def parse(name: str) -> Frame | None:
    """``train.py(116): get_batch`` -> Frame; None for built-ins and module markers."""
    m = _PY_FRAME.match(name)
    if m is None:
        return None
    return Frame(m.group(1), int(m.group(2)), m.group(3))


_OWN_FILE = re.compile(r"(?:^|/)advisor/(?:capture/|commands/|cli\.py$)|(?:^|/)click/")


def is_own_frame(name: str) -> bool:
    """A frame of `advisor profile` itself (its hooks: ``session.py __next__``, ``opt_post``)
    or of the command line that started the script (``cli.py``, click): not the user's code
    and no library call the user made, so never a line or a call label of theirs."""
    frame = parse(name)
    return frame is not None and bool(_OWN_FILE.search(frame.file.replace("\\", "/")))


@lru_cache(maxsize=4096)
def is_user_file(file: str) -> bool:
    """True when ``file`` is the user's code (see the module docstring)."""
    if not file or file.startswith("<"):
        return False
    path = file.replace("\\", "/")
    if any(mark in path for mark in _INSTALLED) or re.search(r"/lib/python\d", path):
        return False
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts:
        return False
    if path.startswith("/"):
        # an absolute path outside site-packages: the script's own tree, or an editable install
        # of a framework (its package directory is somewhere in the path)
        return not any(p in FRAMEWORKS for p in parts[:-1])
    top = parts[0] if len(parts) > 1 else parts[0].rsplit(".", 1)[0]
    return top not in FRAMEWORKS and top not in sys.stdlib_module_names


def call_label(name: str) -> str:
    """A library call as a reader knows it: ``Tensor.item``, ``backward (torch/_tensor.py)``."""
    m = _BUILTIN_METHOD.match(name)
    if m:
        return f"{m.group(2)}.{m.group(1)}" if m.group(1) else m.group(2)
    m = _BUILTIN_FUNCTION.match(name)
    if m:
        return m.group(1)
    frame = parse(name)
    if frame is not None:
        return f"{frame.function} ({frame.file})"
    if name.startswith("nn.Module: "):
        return name[len("nn.Module: "):].rsplit("_", 1)[0]
    name = operator_name(name)
    return name if len(name) <= 60 else name[:59] + "…"


def callee_name(label: str) -> str:
    """The bare name a call site uses for a call label: ``Tensor.item`` -> ``item``."""
    base = label.split(" (", 1)[0]
    return base.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
