"""advisor's own hooks are never a call label of the user's, whatever ran under them.

`advisor profile` wraps the DataLoader's ``__next__`` (``advisor/capture/hooks.py``). Under load
the longest range under that wrapper is sometimes the profiler's own record_function of the
DataLoader (an annotation, not a Python frame) and sometimes nothing was sampled under it: the
label then named advisor's file (CI, 2026-12-02: ``__next__ (advisor/capture/hooks.py)``, 61%
of a step). The label is the call it wrapped, or the bare function name.
"""

from __future__ import annotations

from advisor.graph.model import CpuRange, RangeSource
from advisor.graph.source_lines import _longest_children, _unwrapped

HOOK = "/venv/lib/python3.11/site-packages/advisor/capture/hooks.py(120): __next__"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
WRAPPER = "torch/utils/_contextlib.py(115): decorate_context"


def _label(ranges: list[CpuRange]) -> str:
    order = sorted(ranges, key=lambda r: (r.start_ns, -r.end_ns))
    return _unwrapped(order, _longest_children(order), 0)


def _r(i: int, name: str, start: int, end: int, source: RangeSource) -> CpuRange:
    return CpuRange(i, name, start, end, 1, 1, source)


def test_the_hook_is_named_after_the_profilers_range_it_ran():
    assert _label([_r(0, HOOK, 0, 100, RangeSource.PYTHON),
                   _r(1, LOADER, 5, 95, RangeSource.ANNOTATION)]) == LOADER


def test_the_hook_with_nothing_under_it_is_its_function_not_its_file():
    assert _label([_r(0, HOOK, 0, 100, RangeSource.PYTHON)]) == "__next__"


def test_a_library_wrapper_keeps_its_own_name_over_an_operator():
    """Decorators' wrappers are named after the Python call they wrap only: over an operator,
    or alone, they keep their name (the rule before the hook case)."""
    assert _label([_r(0, WRAPPER, 0, 100, RangeSource.PYTHON),
                   _r(1, "aten::add", 5, 95, RangeSource.OPERATOR)]) == WRAPPER
    assert _label([_r(0, WRAPPER, 0, 100, RangeSource.PYTHON)]) == WRAPPER
