"""advisor: why a training step on an H100 is slow, what to change, and how much faster it gets."""

DISTRIBUTION = "h100-advisor"
"""The name advisor is published under (``pip install h100-advisor``); the package and the command
stay ``advisor``. The index's ``advisor`` is an unrelated project."""
