"""Where the step time moved between the runs: GPU busy and idle, kernel categories and kernels,
per-step counts, phases, and what the host was doing while the GPU idled.

Every figure is per steady-state step, candidate minus baseline, so a reviewer can read "+1.4 ms
of GPU idle in cudaStreamSynchronize" next to "+1 explicit synchronization per step".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from advisor.gate.inputs import GateInput, KernelRow
from advisor.graph.kernels import short_name

MIN_SHOWN_MS = 0.001  # changes under a microsecond per step are not worth a line
TOP_KERNELS = 8


@dataclass(frozen=True)
class Change:
    name: str
    base: float
    cand: float

    @property
    def delta(self) -> float:
        return self.cand - self.base

    @property
    def relative(self) -> float | None:
        return self.cand / self.base - 1.0 if self.base else None


@dataclass(frozen=True)
class Attribution:
    gpu_busy_ms: Change | None
    gpu_idle_ms: Change | None
    categories_ms: tuple[Change, ...]
    kernels_ms: tuple[Change, ...]
    counts: tuple[Change, ...]
    phases_ms: tuple[Change, ...]
    idle_causes_ms: tuple[Change, ...]


_FUNCTOR = re.compile(r"([A-Za-z_]\w*(?:Functor|Impl|Op|_kernel|Kernel)\w*)")
_QUALIFIER = re.compile(r"^(?:\w+::)+")


def display_name(name: str) -> str:
    """A short kernel name that still tells instantiations apart: ``short_name`` drops template
    arguments, and with them ``GeluCUDAKernelImpl`` from ``vectorized_elementwise_kernel<...>``."""
    short = short_name(name, limit=70)
    if "<" not in name:
        return short
    inner = name[name.index("<") + 1:]
    hints = [_QUALIFIER.sub("", m) for m in _FUNCTOR.findall(inner)]
    hints = [h for h in hints if h and h not in short]
    return f"{short} [{hints[0][:40]}]" if hints else short


_OP_SUFFIX = re.compile(r",\s*(?:seq|op_id|op|o|s)\b.*$")


def cause_key(cause: str) -> str:
    """An idle cause without the per-capture numbers (``aten::mul, seq = 46207, op_id = 99``)."""
    return re.sub(r"\d+", "#", _OP_SUFFIX.sub("", cause)).strip()


def _changes(a: Mapping[str, float], b: Mapping[str, float], min_abs: float) -> tuple[Change, ...]:
    rows = [Change(k, a.get(k, 0.0), b.get(k, 0.0)) for k in set(a) | set(b)]
    rows = [r for r in rows if abs(r.delta) >= min_abs]
    return tuple(sorted(rows, key=lambda r: (-abs(r.delta), r.name)))


def _kernel_ms(rows: tuple[KernelRow, ...]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k in rows:
        out[display_name(k.name)] += k.ms_per_step
    return out


def _causes(x: GateInput) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for k, v in x.idle_causes_ms.items():
        out[cause_key(k)] += v
    return out


def attribute(base: GateInput, cand: GateInput) -> Attribution:
    busy_b, busy_c = base.median_busy_ms, cand.median_busy_ms
    busy = idle = None
    if busy_b is not None and busy_c is not None:
        busy = Change("GPU busy", busy_b, busy_c)
        idle = Change("GPU idle", base.median_ms - busy_b, cand.median_ms - busy_c)
    counts = [Change(k, base.counts[k], cand.counts[k])
              for k in base.counts if k in cand.counts and base.counts[k] != cand.counts[k]]
    return Attribution(
        gpu_busy_ms=busy,
        gpu_idle_ms=idle,
        categories_ms=_changes(base.categories_ms, cand.categories_ms, MIN_SHOWN_MS),
        kernels_ms=_changes(_kernel_ms(base.kernels), _kernel_ms(cand.kernels),
                            MIN_SHOWN_MS)[:TOP_KERNELS],
        counts=tuple(counts),
        phases_ms=_changes(base.phases_ms, cand.phases_ms, MIN_SHOWN_MS),
        idle_causes_ms=_changes(_causes(base), _causes(cand), MIN_SHOWN_MS)[:TOP_KERNELS],
    )
