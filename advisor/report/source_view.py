"""The user's source lines in every report: the ``source`` section of the JSON, the console's
table of the lines that leave the GPU idle, and the data of the HTML's source view and flame.

Built from `advisor.graph.source_lines` (what the trace's Python stacks say) and
`advisor.graph.call_sites` (the exact calling line, read from the user's file when readable).
A location reads ``train.py:305 <module> -> backward``: the line that makes the library call
when it was found in the file, else the line the function starts at (``train.py:116
get_batch``), else the function alone (a frame already running when the window started).
Backward work reads ``scenario.py:58 loss_loop (backward of its ops, run by scenario.py:158
step -> backward)``: the frame whose forward ops created the autograd nodes, and the call the
backward ran under.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.graph.call_sites import SourceFiles
from advisor.graph.frames import Frame, callee_name
from advisor.graph.source_lines import (
    BACKWARD_OF,
    NO_FRAME,
    LineCost,
    SourceAttribution,
    has_stacks,
)
from advisor.report.units import share as share_of_step
from advisor.safe_text import markup, plain

NO_STACKS = ("no Python stacks in this trace, so no source lines: record with `advisor profile` "
             "(stacks are on by default) or torch.profiler(with_stack=True)")
NSYS_NO_STACKS = ("source lines need Python stacks: none beside this nsys export (`advisor "
                  "profile --nsys` samples them into pystacks_rank<R>.json.gz next to "
                  "nsys_rank<R>.sqlite and its capture_rank<R>.json; nsys's own Python "
                  "backtraces are not read)")
TOP = 20


def _ms(ns: float) -> float:
    return round(ns / 1e6, 4)


@dataclass(frozen=True)
class SourceSection:
    """What the report model keeps of an analysis for the source views (built once by
    `advisor.report.model.build_report`, so no view reads the graph)."""

    attribution: SourceAttribution | None
    stacks: bool  # the trace carries Python stacks
    note: str  # why there are no source lines ("" when there are)
    has_steps: bool
    roots: tuple[Path, ...]  # where the user's files are read from
    findings: tuple[tuple[str, str], ...]  # (rule, code) of each finding, in report order

    @classmethod
    def of(cls, analysis) -> SourceSection:
        roots = list(getattr(analysis, "source_roots", []) or [])
        if not roots:
            roots = [Path.cwd()]
            if analysis.graph.info.path:
                roots.append(Path(analysis.graph.info.path).resolve().parent)
        return cls(analysis.source, has_stacks(analysis.graph), _note(analysis),
                   bool(analysis.graph.steps), tuple(roots),
                   tuple((f.rule, f.code) for f in analysis.results.findings))


class Locator:
    """Locations of frames and calls, reading the user's files once each."""

    def __init__(self, sec: SourceSection) -> None:
        self.files = SourceFiles(list(sec.roots))

    def call_lines(self, frame: Frame, callee: str) -> list[int]:
        """Lines in ``frame`` that call ``callee`` (those inside loops first)."""
        if frame is NO_FRAME or not callee or callee == BACKWARD_OF:
            return []
        return self.files.call_lines(frame.file, frame.function, frame.line, callee_name(callee))

    def call_line(self, frame: Frame, callee: str) -> int | None:
        found = self.call_lines(frame, callee)
        return found[0] if found else None

    def frame(self, frame: Frame) -> dict[str, Any]:
        return {"file": frame.file, "line": frame.line or None, "function": frame.function}

    def line(self, lc: LineCost) -> dict[str, Any]:
        """One location as the JSON gives it (``line``: where the function starts;
        ``call_line``: the line in it that makes the ``via`` call; ``called_from``: the caller's
        line that calls this function, when a user frame called it directly)."""
        out = self.frame(lc.frame)
        out["via"] = lc.via
        out["call_line"] = self.call_line(lc.frame, lc.via)
        out["call_lines"] = self.call_lines(lc.frame, lc.via)
        called = None
        if lc.caller is not None:
            called = self.frame(lc.caller)
            called["call_line"] = self.call_line(lc.caller, lc.frame.function)
        out["called_from"] = called
        if lc.through is not None:
            tf, tvia = lc.through
            through = self.frame(tf)
            through["via"] = tvia
            through["call_line"] = self.call_line(tf, tvia)
            out["through"] = through
        return out

    def through(self, lc: LineCost) -> str:
        """The call backward work ran under: ``scenario.py:158 step -> backward``."""
        if lc.through is None:
            return ""
        tf, tvia = lc.through
        at = self.call_line(tf, tvia) or tf.line
        text = f"{tf.file}:{at} {tf.function}" if at else f"{tf.file} {tf.function}"
        return f"{text} -> {tvia}" if tvia else text

    def label(self, lc: LineCost) -> str:
        """``train.py:305 <module> -> backward (torch/_tensor.py)``."""
        f = lc.frame
        if f is NO_FRAME:
            return f.file
        calls = self.call_lines(f, lc.via)
        where = (f"{f.file}:{'/'.join(map(str, calls[:3]))}" if calls
                 else (f"{f.file}:{f.line}" if f.line else f.file))
        text = f"{where} {f.function}"
        if lc.via == BACKWARD_OF:
            through = self.through(lc)
            text += f" ({BACKWARD_OF}, run by {through})" if through else f" ({BACKWARD_OF})"
        elif lc.via:
            text += f" -> {lc.via}"
        elif lc.caller is not None:
            at = self.call_line(lc.caller, f.function)
            if at:
                text += f" (called at {lc.caller.file}:{at})"
        return text

    def excerpt(self, lc: LineCost, context: int = 2) -> list[dict[str, Any]]:
        line = self.call_line(lc.frame, lc.via) or lc.frame.line
        return [{"line": n, "text": t, "hit": n == line}
                for n, t in self.files.excerpt(lc.frame.file, line, context)]


def _note(analysis) -> str:
    graph = analysis.graph
    if graph.info.format == "nsys-sqlite" and not has_stacks(graph):
        # samples beside the export that could not be used say why (advisor.ingest.pystacks)
        why = [n for n in graph.info.notes if "pystacks_" in n]
        return f"source lines need Python stacks: {why[0]}" if why else NSYS_NO_STACKS
    if not analysis.graph.steps:
        return "no steps found: source lines are given per step"
    return NO_STACKS


def to_json(sec: SourceSection) -> dict[str, Any]:
    """The JSON's ``source`` section (``stacks: false`` and a note when there are no stacks)."""
    src = sec.attribution
    if src is None:
        return {"stacks": sec.stacks, "note": sec.note}
    loc = Locator(sec)
    idle_total = sum(x.ns_per_step for x in src.idle) or 1.0

    def rows(items: list[LineCost], share_of: float | None = None) -> list[dict[str, Any]]:
        out = []
        for lc in items[:TOP]:
            row = loc.line(lc)
            row["ms_per_step"] = _ms(lc.ns_per_step)
            if share_of:
                row["share"] = round(share_of_step(lc.ns_per_step, share_of) or 0.0, 4)
            if lc.count:
                row["evidence_events"] = lc.count
            out.append(row)
        return out

    findings = []
    for k, (rule, code) in enumerate(sec.findings):
        if k in src.findings:
            findings.append({"rule": rule, "code": code, "index": k,
                             "lines": rows(src.findings[k])})
    return {
        "stacks": True,
        "steps": src.steps,
        "thread": {"pid": src.thread[0], "tid": src.thread[1]},
        "python_frames": src.python_frames,
        "gpu_idle": rows(src.idle, idle_total),
        "host": rows(src.host),
        "flame": [{"path": [loc.frame(f) for f in node.path],
                   "total_ms": _ms(node.total_ns_per_step), "self_ms": _ms(node.self_ns_per_step)}
                  for node in src.flame if node.total_ns_per_step >= 1_000][:400],
        "phases": [{"phase": p.phase, "function": loc.frame(p.frame) if p.frame else None,
                    "ms_per_step": _ms(p.ns_per_step)} for p in src.phases],
        "findings": findings,
    }


def relabelled_phases(src: SourceAttribution,
                      min_share: float = 0.25) -> list[tuple[str, Frame, float, float]]:
    """Phases whose host time is mostly in a user function they call directly, not in what the
    hooks named them for: (phase, function, ns per step, share of the phase's host time)."""
    totals: dict[str, float] = {}
    for p in src.phases:
        totals[p.phase] = totals.get(p.phase, 0.0) + p.ns_per_step
    out = []
    for p in src.phases:
        if p.frame is not None and totals[p.phase] > 0:
            share = p.ns_per_step / totals[p.phase]
            if share >= min_share:
                out.append((p.phase, p.frame, p.ns_per_step, share))
    return out


def render_console(console, sec: SourceSection, top: int = 8) -> None:
    """The lines of the user's script that leave the GPU idle (or why there are none)."""
    from rich.table import Table

    src = sec.attribution
    if src is None:
        if sec.has_steps:
            console.print(f"Source lines: {plain(sec.note, 10_000)}", style="italic", markup=False)
        return
    loc = Locator(sec)
    idle_total = sum(x.ns_per_step for x in src.idle)
    rows = [lc for lc in src.idle if lc.ns_per_step >= 0.005 * idle_total][:top]
    if rows:
        console.print(f"GPU idle per step, by the line of your script (mean of {src.steps} steps)",
                      style="italic")
        t = Table(show_edge=True)
        t.add_column("line", overflow="fold")
        t.add_column("idle", justify="right")
        t.add_column("share", justify="right")
        for lc in rows:
            t.add_row(_escape(loc.label(lc)), f"{lc.ns_per_step / 1e6:.3f} ms",
                      f"{lc.ns_per_step / idle_total:.0%}")
        console.print(t)
    for phase, frame, ns, share in relabelled_phases(src):
        at = f"{frame.file}:{frame.line}" if frame.line else frame.file
        console.print(_escape(f"  phase '{phase}': {share:.0%} of its host time "
                              f"({ns / 1e6:.3f} ms per step) is in {at} {frame.function}"),
                      highlight=False)


def render_finding_lines(console, sec: SourceSection, index: int, top: int = 2) -> None:
    """Under a finding: the user lines its evidence was recorded at."""
    src = sec.attribution
    if src is None or index not in src.findings:
        return
    loc = Locator(sec)
    lines = src.findings[index]
    total = sum(lc.count for lc in lines) or 1
    for lc in lines[:top]:
        console.print(_escape(f"   at {loc.label(lc)} ({lc.count / total:.0%} of its evidence)"),
                      highlight=False)


def _escape(text: str) -> str:
    """File and function names come from the trace's Python stacks: `advisor.safe_text`."""
    return markup(text, 10_000)


def _flame_tree(src: SourceAttribution, loc: Locator, min_share: float = 0.005,
                max_depth: int = 10) -> dict[str, Any] | None:
    """The flame view's tree: host time per step by user-frame stack (children in time order
    of size), leaves under ``min_share`` of the root dropped."""
    roots = [n for n in src.flame if len(n.path) == 1]
    if not roots:
        return None
    total = sum(n.total_ns_per_step for n in src.flame if len(n.path) == 1)
    if total <= 0:
        return None
    children: dict[tuple, list] = {}
    for n in src.flame:
        children.setdefault(n.path[:-1], []).append(n)

    def node(path: tuple, ns: float, self_ns: float, depth: int) -> dict[str, Any]:
        kids = [node(c.path, c.total_ns_per_step, c.self_ns_per_step, depth + 1)
                for c in sorted(children.get(path, []), key=lambda c: -c.total_ns_per_step)
                if c.total_ns_per_step >= min_share * total and depth < max_depth]
        f = path[-1] if path else None
        label = "all host time" if f is None else (
            f"{f.file}:{f.line} {f.function}" if f.line else f"{f.file} {f.function}")
        return {"label": label, "ms": ns / 1e6, "self_ms": self_ns / 1e6,
                "share": ns / total, "children": kids,
                "widths": [k["ms"] * 1e6 / ns * 100 if ns else 0 for k in kids]}

    return node((), total, 0.0, 0)


def html_context(sec: SourceSection) -> dict[str, Any]:
    """What the HTML's source view and the findings' source lines show."""
    src = sec.attribution
    if src is None:
        return {"available": False, "note": sec.note if sec.has_steps else "",
                "findings": {}}
    loc = Locator(sec)
    idle_total = sum(x.ns_per_step for x in src.idle) or 1.0

    def row(lc: LineCost, total: float | None = None) -> dict[str, Any]:
        return {"label": loc.label(lc), "ms": lc.ns_per_step / 1e6,
                "share": share_of_step(lc.ns_per_step, total), "count": lc.count,
                "excerpt": loc.excerpt(lc)}

    findings = {}
    for k, lines in src.findings.items():
        n = sum(lc.count for lc in lines) or 1
        findings[k] = [dict(row(lc), share=lc.count / n) for lc in lines[:4]]
    return {
        "available": True,
        "steps": src.steps,
        "idle": [row(lc, idle_total) for lc in src.idle[:10] if lc.ns_per_step >= 0.005 * idle_total],
        "phases": [{"phase": ph, "label": (f"{f.file}:{f.line} {f.function}" if f.line
                                           else f"{f.file} {f.function}"),
                    "ms": ns / 1e6, "share": share} for ph, f, ns, share in relabelled_phases(src)],
        "flame": _flame_tree(src, loc),
        "findings": findings,
    }
