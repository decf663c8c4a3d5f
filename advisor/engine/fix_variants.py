"""Fixes where the trace does not say which framework runs the loop, or shows no PyTorch.

A fix written in the wrong framework's terms is no fix: ``torch.autocast`` to a Lightning user
who needs ``Trainer(precision="bf16-mixed")``. When PyTorch ran but nothing says who runs the
loop (`advisor.engine.framework.UNKNOWN`: a bare nsys capture), the fix gives each knob side by
side, plain PyTorch first, then the Hugging Face Trainer, accelerate and Lightning where the rule
declares one of their own. When the trace shows no PyTorch at all
(`advisor.engine.framework.NO_PYTORCH`: a CUDA C++ application), no PyTorch snippet applies:
the fix names the cause and says the change is in the application's own code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from string import Template

from advisor.engine.rule import Fix

SIDE_BY_SIDE = (("pytorch", "plain PyTorch"), ("hf-trainer", "Hugging Face Trainer"),
                ("accelerate", "Hugging Face accelerate"), ("lightning", "PyTorch Lightning"))
"""The frameworks a fix is given for when the framework is not known, in this order."""


def unknown_framework_fix(rule: type, mechanism: str, values: Mapping[str, str],
                          requires: tuple[str, ...], framework: str) -> Fix:
    """The fix for ``mechanism`` when ``framework`` is ``unknown`` or ``none``."""
    plain = rule.fix_for(mechanism, "pytorch")
    title = Template(plain.title).substitute(values)
    if framework == "none":
        # the mechanism without its examples, which are PyTorch calls (``.item()``, ``.cpu()``)
        cause = rule.mechanisms.get(mechanism, mechanism)
        while (bare := re.sub(r"\s*\([^()]*\)", "", cause)) != cause:  # nested ones too
            cause = bare
        return Fix(title="Change the application's own code: the trace shows no PyTorch, so no "
                         "PyTorch fix applies",
                   snippet=(f"# What the evidence shows: {cause}.\n"
                            "# The findings' evidence (steps, calls, kernels) says where."),
                   kind="code", requires=requires, mechanism=mechanism, framework=framework)
    parts: list[str] = []
    for fw, label in SIDE_BY_SIDE:
        variant = rule.fix_for(mechanism, fw)
        if fw != "pytorch" and variant.framework != fw:
            continue  # no knob of its own: the plain-PyTorch fix applies there too
        parts.append(f"# {label}\n" + Template(variant.snippet).substitute(values))
    note = "" if len(parts) == 1 else " (the framework is not known: each one's knob below)"
    return Fix(title=title + note, snippet="\n\n".join(parts), kind=plain.kind,
               requires=requires, mechanism=mechanism, framework=framework)
