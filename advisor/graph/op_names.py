"""One name per operator, whatever per-call counters the profiler wrote into its range.

``torch.autograd.profiler.emit_nvtx`` (and so every nsys capture of a PyTorch run with operator
ranges) names each operator call ``aten::mul, seq = 46207, op_id = 993760`` and, with shapes,
``..., sizes = [[64, 512]], input_op_ids = [...]``. Every call then has a name of its own: a
table of idle causes or operators keyed by the raw text lists one operator hundreds of times,
each row too small to notice. Reports group by the operator (``aten::mul``) instead.
"""

from __future__ import annotations

import re

_COUNTERS = re.compile(r",\s*(?:seq|op_id|sizes|input_op_ids|input_dims)\s*=.*$", re.S)


def operator_name(name: str) -> str:
    """``aten::mul, seq = 46207, op_id = 993760`` -> ``aten::mul``; other names unchanged."""
    if "=" not in name:
        return name
    return _COUNTERS.sub("", name).strip() or name
