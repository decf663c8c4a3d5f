"""Pause Python's cyclic garbage collector around work that makes many acyclic objects.

Loading a trace makes hundreds of thousands of calls, ops and rows, and the rules' replays as
many short-lived lists and views. None of them form cycles, so reference counting frees them;
the cyclic collector would still run every few hundred allocations and, every so often, walk
every live object, the whole op graph included: a fifth of an analysis's time on the 15 MB
CPU-bound-loss export (issue #17).

When the pause ends, what it made goes straight to the oldest generation (``gc.freeze`` then
``gc.unfreeze``, both O(1) list moves): left in the youngest, the first allocation after the
pause would walk all of it (0.13 s after an analysis of that export), only to promote it. The
cyclic garbage the paused work made is collected at the next full collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block (nested blocks are fine), as it was afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()  # everything tracked -> the permanent generation,
            gc.unfreeze()  # -> and back into the oldest: a young generation to walk no more
            gc.enable()
