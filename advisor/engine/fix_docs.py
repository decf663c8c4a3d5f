"""The "Use instead" section of a rule's documentation: its declared fixes, by mechanism, each
framework's variant. The fix is written once, on the rule (`Rule.fixes`); the findings and the
docs (`advisor.engine.docs`) both show it. This module reads the rule's declarations only, so
`Rule.documented_sections` can call it without the docs importing back into the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from advisor.engine.framework import FRAMEWORKS

FRAMEWORK_LABELS = {"pytorch": "plain PyTorch", "hf-trainer": "Hugging Face Trainer",
                    "lightning": "PyTorch Lightning", "accelerate": "accelerate",
                    "deepspeed": "DeepSpeed"}


class DeclaresFixes(Protocol):
    """What `use_instead` reads of a rule class (`advisor.engine.rule.Rule`)."""

    mechanisms: Mapping[str, str]
    fixes: Sequence[Any]  # `advisor.engine.rule.FixVariant`
    knobs: Mapping[str, Sequence[str]]


def use_instead(rule: DeclaresFixes) -> str:
    """The declared fixes, by mechanism, each framework's variant (``$name``: filled in from
    what the trace shows, such as the host's cores)."""
    out: list[str] = []
    for mechanism, meaning in rule.mechanisms.items():
        out += [f"**{mechanism}**: {meaning}.", ""]
        for fw in FRAMEWORKS:
            v = next((x for x in rule.fixes if x.mechanism == mechanism and x.framework == fw), None)
            if v is None:
                continue
            out += [f"{FRAMEWORK_LABELS[fw]}: *{v.title}*", "", "```python", v.snippet, "```", ""]
        knobs = rule.knobs.get(mechanism, ())
        out += [("`advisor profile --try` tries it without editing the script, as the knob"
                 + ("s " if len(knobs) > 1 else " ") + ", ".join(f"`{k}`" for k in knobs) + ".")
                if knobs else "`advisor profile --try` does not try it: it needs a code change.", ""]
    return "\n".join(out).strip()
