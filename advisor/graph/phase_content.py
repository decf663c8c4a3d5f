"""Phases named by the code that runs in them, not only by where they sit in the step.

`advisor profile`'s hooks (and most hand-written annotations) cut a step by position: the
forward returns, the backward starts, and what lies between is called ``loss``. Scripts put
other work there. nanoGPT's ``train.py`` fetches the next batch between its forward and its
backward (``get_batch``: ``np.memmap`` slicing, ``torch.stack`` of 64 rows, ``pin_memory()``,
``.to(device, non_blocking=True)``), so the position-named ``loss`` phase was 93% data
preparation and the rules diagnosed a per-sample loss loop that does not exist. A phase's name
decides which rule reads it (``cpu-bound-loss`` the loss, ``loader-jitter`` the data phase), so
the name must say what the code does.

What the trace holds about a phase span, most telling first:

* Python frames (torch.profiler ``with_stack``): DataLoader iteration
  (``torch/utils/data/...``), numpy and memmap slicing, and a user function whose calls are
  all data work (``get_batch``) are data preparation; ``torch/nn/functional.py cross_entropy``,
  a loss module (``nn.Module: CrossEntropyLoss``) or a user function named for the loss are
  loss code.
* operators: ``aten::stack``/``cat`` of samples, ``pin_memory``, ``randint``/``randperm`` for
  sampling, and host-to-device copies of the batch are data; ``aten::nll_loss``,
  ``aten::cross_entropy_loss``, ``aten::mse_loss`` ... are the loss.
* with neither (an nsys capture with no operator ranges): a span whose GPU work is the batch's
  host-to-device copies and at most as many kernels, with no host sync in it, is the batch
  being prepared and uploaded; a loss launches its own kernels.

A position-named ``loss`` span that is mostly data preparation (at least `DATA_SHARE` of its
host time) and holds no loss code is renamed ``data``; one holding both keeps ``loss`` and its
data work becomes ``data`` spans of their own. The renaming is part of loading (`attach_phases`):
every rule and report reads the same phases, and the graph's notes say what was renamed and why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.graph import api_names
from advisor.graph.frames import is_user_file, parse
from advisor.graph.intervals import merge
from advisor.graph.model import CpuRange, GpuOpKind, OpGraph, RangeSource, Step
from advisor.graph.op_names import operator_name

DATA_SHARE = 0.5
"""A loss span is data preparation when data work covers at least this share of its host time."""

RENAMED = ("loss",)
"""Phases named by position that content may rename: the hooks' ``loss`` is whatever runs
between the forward's return and the backward's start."""

LOSS_OP = re.compile(r"loss|cross_entropy|nll_|criterion|binary_cross|kl_div|ctc_", re.I)
DATA_OPS = frozenset({
    "aten::stack", "aten::cat", "aten::pin_memory", "aten::_pin_memory", "aten::randint",
    "aten::randperm", "aten::from_numpy",
})
"""Operators that assemble a batch on the host: samples stacked or concatenated, pinned for
the copy, sampled indices."""
COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
"""Operators that are data work when they upload host memory (a host-to-device copy)."""
DATA_FRAME = re.compile(
    r"(?:^|/)(?:torch/utils/data|numpy/(?:_?core/memmap|lib/(?:_npyio_impl|npyio|format))|"
    r"datasets|PIL|torchvision/(?:datasets|transforms|io)|torchdata|webdataset|nvidia/dali)"
    r"[/.]")
"""Library code that reads or decodes samples: numpy's memmap and file readers (not numpy at
large: ``np.percentile`` over logged values is no data loading), DataLoader iteration, HF
datasets, image decoding."""
LOADER_FRAME = re.compile(r"(?:^|/)torch/utils/data/")
DATA_BUILTIN = re.compile(
    r"^<built-in (?:method|function) (?:stack|cat|from_numpy|pin_memory|astype|randint|"
    r"randperm|frombuffer|fromfile)\b")
DATA_ANNOTATION = re.compile(r"DataLoader|DataLoaderIter|\bget_batch\b", re.I)
LOSS_FRAME = re.compile(r"(?:^|/)torch/nn/(?:functional|modules/loss)\.py\(\d+\): \w*"
                        r"(?:loss|cross_entropy|nll|kl_div)", re.I)
LOSS_MODULE = re.compile(r"^nn\.Module: \w*(?:Loss|Criterion)\w*", re.I)
LOSS_FUNCTION = re.compile(r"loss|criterion", re.I)


@dataclass(frozen=True)
class Renamed:
    """What one step's position-named phase span turned out to be."""

    phase: str  # the name the position gave
    span: tuple[int, int]
    data_share: float  # share of the span's host time in data work
    what: tuple[str, ...]  # the data work, most host time first (``train.py:116 get_batch``)


def _own_kind(r: CpuRange) -> str:
    """``data``, ``loss`` or ``""`` for a range by its own name."""
    name = r.name
    if r.source is RangeSource.PYTHON:
        if LOSS_FRAME.search(name):
            return "loss"
        frame = parse(name)
        if frame is not None:
            if is_user_file(frame.file):
                return "loss" if LOSS_FUNCTION.search(frame.function) else ""
            return "data" if DATA_FRAME.search(frame.file + "/") else ""
        return "data" if DATA_BUILTIN.match(name) else ""
    if LOSS_MODULE.match(name):
        return "loss"
    op = operator_name(name)
    if op.startswith("aten::") or op.startswith("autograd::"):
        if op in DATA_OPS:
            return "data"
        return "loss" if LOSS_OP.search(op) else ""
    if DATA_ANNOTATION.search(name):
        return "data"
    return "loss" if LOSS_OP.search(name) else ""  # compute_loss, a criterion's range


def is_loss_range(r: CpuRange) -> bool:
    """A range of loss code: a loss operator, ``torch.nn.functional``'s loss functions, a loss
    module, a user function named for the loss, a range named for it (not a framework's frame
    that only passes the loss along)."""
    return _own_kind(r) == "loss"


def _label(r: CpuRange) -> str:
    frame = parse(r.name) if r.source is RangeSource.PYTHON else None
    if frame is not None:
        return f"{frame.file}:{frame.line} {frame.function}"
    return operator_name(r.name)[:60]


def _uploads(graph: OpGraph, r: CpuRange) -> bool:
    """A copy operator that uploaded host memory: one of its calls launched a HtoD copy."""
    return any(
        c.tid == r.tid and c.start_ns >= r.start_ns and c.end_ns <= r.end_ns
        and any(o.kind is GpuOpKind.MEMCPY and o.copy_kind == "HtoD" for o in graph.launched(c))
        for c in graph.calls_overlapping(r.pid, r.start_ns, r.end_ns))


@dataclass
class Content:
    """What one span's ranges say it ran."""

    data: list[tuple[int, int]]  # data work, merged
    loss: list[tuple[int, int]]  # loss code, merged
    covered: list[tuple[int, int]]  # everything a range names (the span's own range excluded)
    labels: Counter[str]  # the data work by host time (``train.py:116 get_batch``)
    frames: bool  # Python frames recorded (with_stack): untraced time is the frames' own
    uploads: bool  # the batch reached the GPU here (pinned, or a host-to-device copy)
    loader: bool  # a DataLoader iterated here (its frames or its profiler range)
    code: bool  # operators or Python frames recorded here: the trace says what code ran

    @property
    def informative(self) -> bool:
        """Whether the ranges say what ran: operators or frames (a library's own NVTX ranges,
        CUB's ``cub::DeviceReduce::Sum``, name a kernel's launcher, not the code)."""
        return self.code

    @property
    def batch(self) -> bool:
        """A batch was fetched here: a DataLoader ran, or host memory was pinned or uploaded.
        Host work alone (numpy over logged values, say) is not data preparation."""
        return self.uploads or self.loader

    def data_share(self, a: int, b: int) -> float:
        """Share of the span's host time that is data work. With stacks every instant is
        named; without them the time no operator covers is Python (numpy slicing, the
        Python loop over samples): data work too once the span assembles and uploads a batch
        and nothing else in it is named."""
        data = _length(self.data)
        if self.frames or not self.uploads:
            return data / (b - a)
        other = _length(self.covered) - data
        return max(0, (b - a) - other) / (b - a)


def _classify(graph: OpGraph, ranges: Sequence[CpuRange], a: int, b: int) -> Content:
    """The span's data work, loss code and what its ranges cover."""
    order = sorted((r for r in ranges if r.start_ns < b and r.end_ns > a),
                   key=lambda r: (r.start_ns, -r.end_ns))
    # each range's kind, with its subtree's: a frame all of whose work is data is data
    kinds = [_own_kind(r) for r in order]
    uploads = loader = False
    for i, r in enumerate(order):
        if kinds[i] == "data" and (DATA_ANNOTATION.search(r.name) or (
                r.source is RangeSource.PYTHON and LOADER_FRAME.search(r.name))):
            loader = True
        op = operator_name(r.name)
        if op in ("aten::pin_memory", "aten::_pin_memory"):
            uploads = True
        elif not kinds[i] and op in COPY_OPS and _uploads(graph, r):
            kinds[i] = "data"
            uploads = True
    has_data = [k == "data" for k in kinds]
    has_loss = [k == "loss" for k in kinds]
    parent = [-1] * len(order)
    stack: list[int] = []
    for i, r in enumerate(order):
        while stack and order[stack[-1]].end_ns <= r.start_ns:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    for i in range(len(order) - 1, -1, -1):  # children come after their parent
        p = parent[i]
        if p >= 0:
            has_data[p] = has_data[p] or has_data[i]
            has_loss[p] = has_loss[p] or has_loss[i]
    data: list[tuple[int, int]] = []
    loss: list[tuple[int, int]] = []
    covered: list[tuple[int, int]] = []
    labels: Counter[str] = Counter()
    frames = code = False
    for i, r in enumerate(order):
        if r.start_ns <= a and r.end_ns >= b:
            continue  # the phase's own range, the loop's frame: they name the whole span
        s, e = max(a, r.start_ns), min(b, r.end_ns)
        covered.append((s, e))
        frames = frames or r.source is RangeSource.PYTHON
        code = code or kinds[i] != "" or r.source in (RangeSource.PYTHON, RangeSource.OPERATOR) \
            or r.name.startswith("aten::")
        p = parent[i]
        outer_taken = p >= 0 and not (order[p].start_ns <= a and order[p].end_ns >= b) and (
            has_data[p] and not has_loss[p])
        if has_data[i] and not has_loss[i] and not outer_taken:
            data.append((s, e))
            labels[_label(r)] += e - s
        if kinds[i] == "loss":
            loss.append((s, e))
    return Content(merge(data), merge(loss), merge(covered), labels, frames, uploads, loader,
                   code)


def _uploads_only(graph: OpGraph, step: Step, a: int, b: int) -> bool:
    """No range says what ran: the span's GPU work is host-to-device copies and at most as
    many kernels, and nothing in it waited for the GPU."""
    copies = kernels = 0
    for c in graph.calls_overlapping(step.pid, a, b):
        if c.tid != step.tid or c.start_ns < a:
            continue
        if api_names.is_sync(c.name):
            return False  # the host waited for the GPU: a decision on a computed value
        for o in graph.launched(c):
            if o.kind is GpuOpKind.MEMCPY and o.copy_kind == "HtoD":
                copies += 1
            elif o.kind is GpuOpKind.MEMCPY and o.copy_kind == "DtoH":
                return False  # a value read back: the loss's own decisions
            elif o.kind is GpuOpKind.KERNEL:
                kernels += 1
    return copies > 0 and kernels <= copies


def _length(spans: Sequence[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def _cut(a: int, b: int, holes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out, cur = [], a
    for s, e in holes:
        if s > cur:
            out.append((cur, s))
        cur = max(cur, e)
    if b > cur:
        out.append((cur, b))
    return out


def name_by_content(graph: OpGraph, step: Step) -> list[Renamed]:
    """Rename the step's position-named phase spans that are data preparation (see the
    module docstring); returns what was renamed."""
    done: list[Renamed] = []
    for phase in RENAMED:
        kept: list[tuple[int, int]] = []
        for a, b in step.phases.get(phase, []):
            if b <= a:
                continue
            ranges = graph.ranges_in(step.pid, step.tid, a, b)
            content = _classify(graph, ranges, a, b)
            data, loss, labels = content.data, content.loss, content.labels
            if not content.informative:
                if _uploads_only(graph, step, a, b):
                    step.phases.setdefault("data", []).append((a, b))
                    done.append(Renamed(phase, (a, b), 1.0, ("host-to-device copies of the "
                                                             "batch",)))
                else:
                    kept.append((a, b))
                continue
            share = content.data_share(a, b)
            if share < DATA_SHARE or not data or not content.batch:
                kept.append((a, b))
                continue
            what = tuple(name for name, _ in labels.most_common(3))
            if loss:
                step.phases.setdefault("data", []).extend(data)
                kept.extend(_cut(a, b, data))
            else:
                step.phases.setdefault("data", []).append((a, b))
            done.append(Renamed(phase, (a, b), share, what))
        if kept:
            step.phases[phase] = kept
        else:
            step.phases.pop(phase, None)
        if "data" in step.phases:
            step.phases["data"].sort()
    return done


def has_loss_code(graph: OpGraph, steps: Sequence[Step], spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the loss spans hold loss code: a loss operator, loss module, loss function or a
    user function named for the loss; True when nothing in them says what ran (no operator or
    frame ranges: the position is all there is to go by)."""
    informative = False
    for step in steps:
        for a, b in spans:
            if not (step.cpu_start_ns <= a < step.cpu_end_ns):
                continue
            ranges = graph.ranges_in(step.pid, step.tid, a, b)
            content = _classify(graph, ranges, a, b)
            if content.loss:
                return True
            informative = informative or content.informative
    return not informative


def describe(renamed: Sequence[Renamed], steps: int) -> str:
    """One note for the report: what was renamed, in how many steps, and the work seen."""
    what: Counter[str] = Counter()
    for r in renamed:
        for w in r.what:
            what[w] += 1
    names = ", ".join(w for w, _ in what.most_common(3))
    share = sum(r.data_share for r in renamed) / len(renamed)
    phase = renamed[0].phase
    return (f"phase '{phase}' (named by its position between forward and backward) is data "
            f"preparation in {len({r.span for r in renamed})} spans of {steps} steps "
            f"({share:.0%} of its host time: {names}): named 'data'")
