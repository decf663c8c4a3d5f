"""Steps that a DataLoader iterator's start explains: the run's epoch structure, not jitter.

A loop over a DataLoader without ``persistent_workers`` starts its workers again at every epoch
and every evaluation pass (pytorch/examples' ImageNet ``main.py``): the step that meets the
start pays the forks, the pinned-memory setup of the new iterator (``cudaHostAlloc``) and, where
an evaluation runs between epochs, the whole pass; the steps after it wait while the fresh
workers refill the prefetch queue. These are the whole-run accounting's ``loader-restarts``
(RUN001, `advisor.capture.accounting`), estimated against the run: step-level rules leave them
out of their evidence, or they would call an epoch boundary a slow step and promise to remove it
(issue 33: a 1.70x ``loader-jitter`` on a restart the step-level fix cannot touch).

Where a start is seen: the session's timed ``DataLoader.__iter__`` calls (`HostFacts`, under
`advisor profile`), or the trace's own Python ranges of ``torch/utils/data/dataloader.py``'s
``__iter__`` (torch.profiler ``with_stack``). The refill after a start is the restart cost's own
window (`advisor.engine.loader_model`: the workers' prefetch depth, at most half the epoch), so
that RUN001 and the step rules split the steps the same way.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence

# The restart cost's own window (RUN001), so both split the steps alike; private there because
# it is the loader model's definition, imported here rather than restated.
from advisor.engine.loader_model import _window as refill_window
from advisor.graph.model import CpuRange, OpGraph, RangeSource, Step

ITER_START = re.compile(r"torch/utils/data/dataloader\.py\(\d+\): (__iter__|_get_iterator)$")
"""``DataLoader.__iter__`` (and the iterator it builds) as torch.profiler's Python tracer names
it: ``<file>(<line>): <function>``; the line moves between torch versions, the file does not."""
PUT_INDEX = re.compile(r"torch/utils/data/dataloader\.py\(\d+\): _try_put_index$")
"""One batch index handed to a worker: a new iterator primes ``prefetch_factor x num_workers``
of them, which gives the prefetch queue's depth where the session did not record the loader."""


def _trace_starts(graph: OpGraph, steps: Sequence[Step]) -> dict[int, int]:
    """Step index -> the prefetch depth its iterator start primed (0 where not counted), from
    the trace's Python ranges on each step's own thread."""
    out: dict[int, int] = {}
    by_thread = {(s.pid, s.tid) for s in steps}
    # one pass, each distinct frame name tested once: a with_stack window repeats a few
    # thousand names over hundreds of thousands of Python ranges
    kind: dict[str, int] = {}  # name -> 1 an iterator start, 2 a batch index put, 0 neither
    starts: list[CpuRange] = []
    puts: list[CpuRange] = []
    python = RangeSource.PYTHON
    for r in graph.ranges:
        if r.source is not python or (r.pid, r.tid) not in by_thread:
            continue
        k = kind.get(r.name)
        if k is None:
            k = kind[r.name] = (1 if ITER_START.search(r.name)
                                else 2 if PUT_INDEX.search(r.name) else 0)
        if k == 1:
            starts.append(r)
        elif k == 2:
            puts.append(r)
    if not starts:
        return out
    for s in steps:
        inside = [r for r in starts if r.pid == s.pid and r.tid == s.tid
                  and s.cpu_start_ns <= r.start_ns < s.cpu_end_ns]
        if inside:
            out[s.index] = max(sum(1 for p in puts if p.pid == r.pid and p.tid == r.tid
                                   and r.start_ns <= p.start_ns < r.end_ns) for r in inside)
    return out


def start_steps(graph: OpGraph, steps: Sequence[Step],
                session_starts: Sequence[int] = ()) -> dict[int, int]:
    """Steps in which a DataLoader iterator started, with the prefetch depth seen (0: unknown):
    the session's record (``session_starts``) and the trace's ranges together."""
    found = _trace_starts(graph, steps)
    for k in session_starts:
        found.setdefault(int(k), 0)
    return found


def restart_steps(graph: OpGraph, steps: Sequence[Step], session_starts: Sequence[int] = (),
                  depth: int | None = None) -> set[int]:
    """The steps a loader start explains: each start's step and its refill after it (``depth``:
    the prefetch queue's, workers x prefetch_factor, when the session recorded the loader; else
    the depth the start primed in the trace, else the next step only)."""
    starts = start_steps(graph, steps, session_starts)
    if not starts:
        return set()
    order = sorted(starts)
    gaps = [b - a for a, b in itertools.pairwise(order) if b > a]
    epoch = int(statistics.median(gaps)) if gaps else None
    out: set[int] = set()
    for k in order:
        d = depth if depth else (starts[k] or 1)
        out.update(refill_window(k, order, d, epoch))
    return out
