"""Run a training script under advisor: find its steps, mark them, record a window of them.

The only package of advisor that imports torch, and only when it is used: importing
``advisor.capture`` itself is free, so ``advisor analyze`` never pays for (or needs) torch.

For loops the automatic hooks cannot see (no ``torch.optim`` optimizer, several steps per
``optimizer.step()``), mark the step yourself::

    import advisor.capture as ac

    for batch in loader:
        with ac.step():
            with ac.phase("forward"):
                ...
"""

from __future__ import annotations

from typing import Any

__all__ = ["phase", "step"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from advisor.capture import api

        return getattr(api, name)
    raise AttributeError(f"module 'advisor.capture' has no attribute {name!r}")
