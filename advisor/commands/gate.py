"""`advisor gate` (being built: see its issue)."""

from __future__ import annotations

import click

from advisor.errors import AdvisorError


@click.command("gate")
def command() -> int:
    """Not available yet."""
    raise AdvisorError("advisor gate is not available in this build")
