"""Knobs: fixes advisor can turn on from outside an unmodified script (`advisor profile --try`).

A rule declares, per mechanism, the knobs that apply its fix (``Rule.knobs``); the finding's
`Fix.knobs` carries them filled in from the evidence (``loader:num_workers=$workers``). A knob
is written ``KIND[:KEY=VALUE]...``: one kind of change, with its settings. The vocabulary is
here, in the engine, so a rule's declaration is checked when the rule is defined; applying a
knob needs torch and lives in `advisor.capture.knobs`.

Why a small fixed vocabulary: each kind is something advisor can apply from its own hooks in
the script's process (a constructor's defaults, a flag, a wrapper around the top-level
module), so trying a fix never means editing the user's code. A fix outside it (remove a host
sync, vectorise a loss) is reported as "needs a code change" instead of being tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KnobKind:
    """One kind of knob: what it changes, its settings, and whether it changes numerics."""

    name: str
    what: str  # in words, for the report
    settings: Mapping[str, type]  # KEY -> the type of VALUE
    numerics: str = ""  # how it changes the numbers the model computes ("" when it does not)


KINDS: dict[str, KnobKind] = {k.name: k for k in (
    KnobKind("loader", "DataLoader settings (every DataLoader the script builds)",
             {"num_workers": int, "pin_memory": bool, "persistent_workers": bool,
              "prefetch_factor": int}),
    KnobKind("compile", "torch.compile of the top-level module(s)", {"mode": str, "backend": str},
             numerics="compiled kernels round differently from eager ones"),
    KnobKind("bf16", "bf16 autocast around the top-level forward", {},
             numerics="matmuls and convolutions run in bf16"),
    KnobKind("tf32", "TF32 matmuls and cuDNN convolutions", {},
             numerics="FP32 matmuls run in TF32 (10-bit mantissa inputs)"),
    KnobKind("ddp", "DistributedDataParallel constructor arguments",
             {"bucket_cap_mb": float, "gradient_as_bucket_view": bool, "static_graph": bool}),
)}

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class KnobError(ValueError):
    """A knob written wrong (a rule's declaration, or ``--try``)."""


@dataclass(frozen=True)
class Knob:
    """A parsed knob: its kind and settings (typed)."""

    kind: str
    settings: Mapping[str, object] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        """The knob written back as ``KIND[:KEY=VALUE]...`` (its identity in reports)."""
        parts = [self.kind] + [f"{k}={_text(v)}" for k, v in self.settings.items()]
        return ":".join(parts)

    @property
    def numerics(self) -> str:
        return KINDS[self.kind].numerics


def _text(v: object) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else f"{v:g}" if isinstance(
        v, float) else str(v)


def _value(kind: str, key: str, raw: str) -> object:
    want = KINDS[kind].settings.get(key)
    if want is None:
        known = ", ".join(KINDS[kind].settings) or "none"
        raise KnobError(f"knob {kind!r} has no setting {key!r} (settings: {known})")
    try:
        if want is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        value = want(raw)
    except ValueError as e:
        raise KnobError(f"knob {kind}:{key}={raw}: not a {want.__name__}") from e
    if key == "mode" and value not in COMPILE_MODES:
        raise KnobError(f"knob compile:mode={raw}: one of {', '.join(COMPILE_MODES)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise KnobError(f"knob {kind}:{key}={raw}: must be >= 0")
    return value


def parse_knob(spec: str) -> Knob:
    """``KIND[:KEY=VALUE]...`` -> `Knob`; `KnobError` with a one-line reason otherwise."""
    parts = [p.strip() for p in spec.strip().split(":")]
    kind = parts[0]
    if kind not in KINDS:
        raise KnobError(f"unknown knob {kind!r} (knobs: {', '.join(KINDS)})")
    settings: dict[str, object] = {}
    for part in parts[1:]:
        key, eq, raw = part.partition("=")
        if not eq or not key:
            raise KnobError(f"knob {spec!r}: settings are KEY=VALUE, got {part!r}")
        settings[key] = _value(kind, key, raw)
    return Knob(kind, settings)


def is_knob(spec: str) -> bool:
    """Whether ``spec`` names a knob kind (it may still be written wrong)."""
    return spec.strip().split(":")[0] in KINDS
