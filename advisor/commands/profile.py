"""`advisor profile` (being built: see its issue)."""

from __future__ import annotations

import click

from advisor.errors import AdvisorError


@click.command("profile")
def command() -> int:
    """Not available yet."""
    raise AdvisorError("advisor profile is not available in this build")
