"""One name per operator, whatever per-call counters the profiler wrote into its range.

``torch.autograd.profiler.emit_nvtx`` (and so every nsys capture of a PyTorch run with operator
ranges) names each operator call ``aten::mul, seq = 46207, op_id = 993760`` and, with shapes,
``..., sizes = [[64, 512]], input_op_ids = [...]``. Every call then has a name of its own: a
table of idle causes or operators keyed by the raw text lists one operator hundreds of times,
each row too small to notice. Reports group by the operator (``aten::mul``) instead.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache

_COUNTERS = re.compile(r",\s*(?:seq|op_id|sizes|input_op_ids|input_dims)\s*=.*$", re.S)


def operator_name(name: str) -> str:
    """``aten::mul, seq = 46207, op_id = 993760`` -> ``aten::mul``; other names unchanged."""
    if "=" not in name:
        return name
    return _COUNTERS.sub("", name).strip() or name


_EMITTED = re.compile(r"^(?P<name>.*?)(?P<counters>,\s*(?:stashed\s+)?seq\s*=.*|,\s*op_id\s*=.*"
                      r"|,\s*sizes\s*=.*)$", re.S)
_SEQ = re.compile(r"(?:^|,)\s*(?P<stashed>stashed\s+)?seq\s*=\s*(?P<n>\d+)")
_SIZES = re.compile(r",\s*sizes\s*=\s*(?P<sizes>\[.*?\])\s*(?:,\s*input_op_ids\s*=|$)", re.S)
EVALUATE_FUNCTION = "autograd::engine::evaluate_function: "
"""The prefix of the range around each autograd node the backward pass runs."""
_NAMESPACED = re.compile(r"[A-Za-z_]\w*(?:::\w+)+")
"""An operator's qualified name (``aten::mul``, ``torch::autograd::AccumulateGrad``), matched
whole: a framework's own scope (``FSDP::pre_forward (blocks.10)``) is a record_function, not an
operator, as torch.profiler files it."""
_AUTOGRAD_NODE = re.compile(r"^[A-Z]\w*Backward\d*$")
MAX_SIZES_CHARS = 4096
"""Longer ``sizes = [...]`` text is not parsed (an operator over thousands of tensors): the
operator keeps its name, without shapes."""
MAX_COUNTERS_CHARS = 65536
"""Counters longer than this (a hostile or broken export: NVTX text may hold megabytes) are not
searched for sizes, so the search stays bounded in the text's length."""


@dataclass(frozen=True, slots=True)
class NvtxOperator:
    """What a PyTorch NVTX range says about its operator (see `nvtx_operator`)."""

    name: str  # the operator, counters stripped: ``aten::mul``
    operator: bool  # a framework operator or autograd node, not a user's record_function
    sequence: int = -1  # autograd sequence number (``seq = N``), -1: none
    backward: bool = False  # a backward node's range (``autograd::engine::evaluate_function``)
    shapes: tuple | None = None  # input sizes (``sizes = [[64, 512], []]``), when recorded


def nvtx_operator(text: str) -> NvtxOperator | None:
    """The operator of a range PyTorch wrote into NVTX, or None for any other range.

    With ``torch.autograd.profiler.emit_nvtx`` (nsys ``--pytorch=autograd-nvtx`` or
    ``autograd-shapes-nvtx``) every ``RecordFunction`` becomes an NVTX range named
    ``<name>[, seq = N][, op_id = M][, sizes = [...]][, input_op_ids = [...]]``: the operators
    (``aten::mul``), the autograd nodes the backward pass runs
    (``autograd::engine::evaluate_function: MulBackward0`` carrying the sequence number of the
    forward op that built it), and the user's ``record_function`` scopes (no sequence number).
    Reading these as operators is what lets a capture with them give the phases, operator
    grouping and framework detection that a torch.profiler trace gives."""
    # emit_nvtx writes its counters as ", seq = N" ... (C++ fmt): found with str.find; the
    # regular expression is kept for other spacing (a window holds 10^5 of these ranges)
    cut = text.find(", ")
    while cut >= 0 and not text.startswith(_MARKERS, cut):
        cut = text.find(", ", cut + 2)
    if cut >= 0:
        name, counters = text[:cut].strip(), text[cut:]
    elif "=" in text and (m := _EMITTED.match(text)) is not None:
        name, counters = m.group("name").strip(), m.group("counters")
    else:
        name = text.strip()
        return NvtxOperator(name, True) if _kind(name)[0] else None
    if not name:
        return None
    operator, backward = _kind(name)
    seq = _SEQ.search(counters) if "seq" in counters else None
    # a node's own range (``DivBackward0, seq = N``) and the engine's range around it run the
    # backward of the forward op numbered N
    backward = backward or bool(seq and seq.group("stashed"))
    return NvtxOperator(name, operator, int(seq.group("n")) if seq else -1, backward,
                        _sizes(counters) if "sizes" in counters and len(counters) <= MAX_COUNTERS_CHARS
                        else None)


_MARKERS = (", seq = ", ", stashed seq = ", ", op_id = ", ", sizes = ")


@lru_cache(maxsize=65536)
def _kind(name: str) -> tuple[bool, bool]:
    """(an operator or autograd node, a backward range) by the name alone: a window repeats a
    few hundred operator names, each tested once."""
    node = bool(_AUTOGRAD_NODE.match(name))
    engine = name.startswith(EVALUATE_FUNCTION)
    return bool(_NAMESPACED.fullmatch(name)) or node or engine, node or engine


def _sizes(counters: str) -> tuple | None:
    m = _SIZES.search(counters)
    if m is None or len(m.group("sizes")) > MAX_SIZES_CHARS:
        return None
    try:
        value = ast.literal_eval(m.group("sizes"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return _as_shapes(value) if isinstance(value, list) else None


def _as_shapes(value: object, depth: int = 0) -> object:
    """Lists of ints (nested for TensorList inputs) -> tuples, as the Kineto reader keeps them."""
    if isinstance(value, list) and depth < 4:
        return tuple(_as_shapes(v, depth + 1) for v in value)
    return value if isinstance(value, int) else None
