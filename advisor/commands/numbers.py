"""Numeric command-line options that are finite and in range, or a usage error (exit 2).

click's ``FloatRange`` compares with ``<`` and ``>``, which NaN always fails, so
``--threshold nan`` slipped through it and turned every comparison of the gate into a pass;
``inf`` and ``1e400`` (read as inf) parsed too. A verdict computed from such a number means
nothing, and a NaN written into the JSON verdict makes it invalid JSON, so these are refused
before any work.
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """`click.FloatRange` that also refuses NaN and infinities, whatever the bounds."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)
