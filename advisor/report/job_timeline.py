"""The job page's timeline: the straggler's step beside a typical rank's, on one time axis.

Drawn by the single-trace report's own code: each rank's step becomes timeline data with
`advisor.report.timeline_view.step_timeline` (lanes of host threads with the step's phases, the
GPU's idle gaps with their cause, one lane per stream with communication kernels coloured as
such), and the two are joined into one timeline that `timeline.js` draws unchanged, each rank's
lanes under a group titled with its rank. Both steps start at the same place on the axis, so
where the straggler's step runs longer is where the two pictures part.

Which step: the aligned step whose job time (the slowest rank's) is closest to the median, as
the single-trace timeline draws the step closest to the median. Which ranks: the straggler (the
slowest rank of that step where the job has none) and the typical rank, the other rank whose own
work in that step is the median of the others'.

The ranks' traces are read again, whole: the job's summaries keep per-step totals, not the
events a timeline draws. Only the two traces drawn are read, and only for the HTML page. A trace
that cannot be read here (a job analysed on a remote Dask cluster whose paths are the workers')
leaves the page without a timeline and says why.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from advisor.errors import AdvisorError
from advisor.graph.model import OpGraph, Step
from advisor.graph.step_breakdown import breakdown
from advisor.report.job_section import JobSection, JobStepRow, RankRow
from advisor.report.timeline_view import Caps, step_timeline

HALF_CAPS = Caps(gpu_ops=3000, ranges=2500, api_calls=2000, gaps=2000, threads=3)
"""Each rank's share of what one report embeds (`Caps`): two steps in the size of one."""


@dataclass(frozen=True)
class DrawnRank:
    """One rank's step on the job page: which rank, why it is drawn, where its step is."""

    rank: int
    role: str  # "straggler", "slowest", "typical"
    row: RankRow
    window_ns: tuple[int, int]  # its step on its trace's clock (`JobStepRow.rank_window_ns`)


def pick(section: JobSection) -> tuple[JobStepRow, list[DrawnRank]] | None:
    """The step and the ranks to draw (see the module docstring); None without aligned steps."""
    steps = [s for s in section.steps if s.rank_window_ns]
    if not steps:
        return None
    median = statistics.median(s.time_ns for s in steps)
    step = min(steps, key=lambda s: (abs(s.time_ns - median), s.index))
    order = list(section.step_ranks)
    rows = {r.rank: r for r in section.ranks}
    first = section.straggler_rank
    role = "straggler"
    if first not in order:
        first = order[max(range(len(order)), key=lambda i: step.rank_time_ns[i])]
        role = "slowest"
    drawn = [DrawnRank(first, role, rows[first], step.rank_window_ns[order.index(first)])]
    others = sorted((step.rank_own_work_ns[i], r) for i, r in enumerate(order) if r != first)
    if others:
        typical = others[(len(others) - 1) // 2][1]  # the lower median: a rank that exists
        drawn.append(DrawnRank(typical, "typical", rows[typical],
                               step.rank_window_ns[order.index(typical)]))
    return step, drawn


def locate(graph: OpGraph, pid: int | None, window: tuple[int, int]) -> Step | None:
    """The rank's step in its whole trace: the step of its process that overlaps ``window``
    most (the slim reader and the whole one detect the same steps; their numbers may differ
    where the job aligned steps by position). A rank without steps of its own was summarised
    on another process's step windows: that step, drawn with the rank's process."""
    lo, hi = window

    def overlap(s: Step) -> int:
        a = s.gpu_start_ns if s.gpu_start_ns is not None else s.cpu_start_ns
        b = s.gpu_end_ns if s.gpu_end_ns is not None else s.cpu_end_ns
        return min(b, hi) - max(a, lo)

    own = [s for s in graph.steps if pid is None or s.pid == pid]
    for candidates in (own, graph.steps):
        best = max(candidates, key=overlap, default=None)
        if best is not None and overlap(best) > 0:
            return best if pid is None or best.pid == pid else replace(best, pid=pid)
    return None


def _join(parts: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One timeline of several steps' data: each step's lanes under its own groups (titled
    with ``label``), names and colour classes interned once, every step's window start (its
    step's start less the margin) at the axis' zero, the first step's header."""
    names: list[str] = []
    classes: list[str] = []
    index: dict[tuple[str, str], int] = {}

    def intern(table: list[str], kind: str, text: str) -> int:
        key = (kind, text)
        if key not in index:
            index[key] = len(table)
            table.append(text)
        return index[key]

    lead = max(d["step"]["cpu"][0] if d["step"]["cpu"][0] is not None else 0 for _, d in parts)
    groups: list[dict[str, str]] = []
    lanes: list[dict[str, Any]] = []
    trimmed: list[str] = []
    class_ns: dict[str, int] = {}
    span = base_id = 0
    first_step: dict[str, Any] = {}
    for label, d in parts:
        shift = lead - (d["step"]["cpu"][0] or 0)  # the step starts at the same place for all
        base = len(groups)
        groups += [{"title": f"{label} · {g['title']}", "sub": g["sub"]} for g in d["groups"]]
        # node ids (events' id and launch link) are each trace's own: moved past the ones
        # before, so a kernel's launch link never reaches into the other rank's lanes
        ids = base_id
        for lane in d["lanes"]:
            ev = [[e[0] + shift, e[1], intern(names, "n", d["names"][e[2]]),
                   intern(classes, "c", d["classes"][e[3]]),
                   e[4] + base_id if e[4] >= 0 else e[4], e[5] + base_id if e[5] >= 0 else e[5],
                   *e[6:]] for e in lane["ev"]]
            ids = max([ids, *(x + 1 for e in ev for x in e[4:6])])
            lanes.append({**lane, "group": lane["group"] + base, "ev": ev})
        base_id = ids
        trimmed += [f"{label}: {t}" for t in d["trimmed"]]
        for k, v in d["class_ns"].items():
            class_ns[k] = class_ns.get(k, 0) + v
        span = max(span, d["span_ns"] + shift)
        if not first_step:
            first_step = {**d["step"], **{k: [None if t is None else t + shift for t in d["step"][k]]
                                          for k in ("cpu", "gpu")}}
    return {"step": first_step, "origin_ns": 0, "span_ns": span, "groups": groups, "lanes": lanes,
            "names": names, "classes": classes, "trimmed": trimmed,
            "class_ns": dict(sorted(class_ns.items(), key=lambda kv: -kv[1]))}


@dataclass(frozen=True)
class JobTimeline:
    """The drawn timeline (None: none could be drawn) and what the page says about it."""

    data: dict[str, Any] | None
    step_index: int | None
    ranks: tuple[DrawnRank, ...]
    note: str = ""


def job_timeline(section: JobSection, load: Callable[[str], OpGraph] | None = None,
                 caps: Caps = HALF_CAPS) -> JobTimeline:
    """The straggler's and a typical rank's step as one timeline (see the module docstring);
    ``load`` reads a rank's trace (`advisor.ingest.base.load_trace` by default); ``caps``:
    what each rank's step may embed."""
    picked = pick(section)
    if picked is None:
        return JobTimeline(None, None, (), "no aligned steps to draw")
    step, drawn = picked
    if load is None:
        from advisor.ingest.base import load_trace

        load = load_trace
    parts: list[tuple[str, dict[str, Any]]] = []
    graphs: dict[str, OpGraph] = {}
    for d in drawn:
        try:
            graph = graphs.get(d.row.path) or load(d.row.path)
        except (AdvisorError, OSError) as e:
            return JobTimeline(None, step.index, tuple(drawn),
                               f"rank {d.rank}'s trace could not be read here ({e})")
        graphs[d.row.path] = graph
        found = locate(graph, d.row.pid, d.window_ns)
        if found is None:
            return JobTimeline(None, step.index, tuple(drawn),
                               f"rank {d.rank}'s step {step.index} was not found in its trace")
        data = step_timeline(graph, breakdown(graph, found, graph.projector), caps)
        parts.append((f"rank {d.rank} ({d.role})", data))
    return JobTimeline(_join(parts), step.index, tuple(drawn))
