"""The HTML report: one self-contained file, a view of the same result the JSON carries.

Everything is inline (CSS, the timeline's script, SVG charts, the JSON result itself in a
``<script type="application/json">``), so the file opens offline: as a CI artifact, from an
air-gapped cluster. A Content-Security-Policy forbids any network fetch and allows only our own
script (by hash), so even a rendering mistake cannot run a trace's text as code. jinja2
autoescapes everything the trace supplies (kernel names, NVTX text, paths).
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from advisor.analysis import Analysis
from advisor.output_paths import write_atomic
from advisor.report import html_view as view
from advisor.report import palette, source_view
from advisor.report.job_timeline import JobTimeline, job_timeline
from advisor.report.json_report import SCHEMA_VERSION, advisor_version, to_dict
from advisor.report.model import Report, as_report
from advisor.report.roofline_view import roofline_svg
from advisor.report.step_chart import step_chart
from advisor.report.units import share
from advisor.safe_text import visible

TEMPLATES = "advisor.report.templates"


def shown(value: object) -> object:
    """Every ``{{ }}`` of a page: text through the output policy (`advisor.safe_text.visible`:
    controls and bidi overrides from trace names would reorder or hide what the page shows),
    then autoescaped; markup advisor built (the CSS, the script, ``tojson``'s JSON) as it is."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(TEMPLATES, "."),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )
    # Compact JSON: the timeline data is most of the file. tojson still escapes < > & ' for HTML.
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":")}
    env.filters.update(ms=view.fmt_ms, ns=view.fmt_ns, pct=view.fmt_pct, x=view.fmt_x,
                       count=view.fmt_count, bytes=view.fmt_bytes,
                       basename=lambda p: Path(str(p)).name)
    return env


def _asset(name: str) -> str:
    return files(TEMPLATES).joinpath(name).read_text(encoding="utf-8")


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def _context(rep: Report) -> dict[str, Any]:
    """What the template shows: the report's JSON, formatted, and the model's own fields."""
    report = to_dict(rep)
    steps, trace = report["steps"], report["trace"]
    drawn = rep.timeline
    timeline = drawn.data if drawn is not None else None
    median_ms = steps["median_ms"]
    baseline_ms = report["baseline_step_ms"]  # the one step time every number below uses
    categories = report["kernels"]["by_category_ms"]
    busy = steps["gpu_busy_ms"]
    marks = rep.steps.marks
    return {
        "report": report,
        "trace": trace,
        "steps": steps,
        "trace_name": view.trace_name(trace["path"]),
        "gpu_label": view.gpu_label(trace["gpus"]),
        "software": view.software_items(trace),
        "busy_share": share(busy, median_ms),
        "combined": rep.combined,
        "findings": [view.finding_view(f, baseline_ms, list(rf.timeline_ids))
                     for f, rf in zip(report["findings"], rep.findings, strict=True)],
        "below_threshold": rep.below_threshold,
        "timeline": timeline,
        "legend": view.legend(timeline),
        "chart": step_chart(steps["times_ms"], [m.warmup for m in marks], [m.index for m in marks],
                            drawn.step_position if drawn is not None else None),
        "categories": view.shares(categories, None, lambda k: f"k-{k}"),
        "phases": view.shares(steps["phases"], median_ms, palette.phase_class),
        "idle_causes": view.shares(steps["idle_causes_ms"], median_ms,
                                   lambda k: "idle-" + palette.idle_class(k)),
        "top_kernels": report["kernels"]["top"],
        "roofline": roofline_svg(report.get("efficiency")),
        "kernel_total_ms": sum(v or 0.0 for v in categories.values()),
        "median_ms": median_ms,
        "baseline_ms": baseline_ms,
        "skipped": rep.skipped_by_reason(),
        # `advisor profile --try`: the fixes measured on the job (absent otherwise)
        "tried": report.get("tried"),
        "tried_rows": [*report["tried"]["fixes"], *([report["tried"]["combination"]]
                       if report["tried"]["combination"] else [])] if report.get("tried") else [],
        "schema_version": SCHEMA_VERSION,
        "source": (source_view.html_context(rep.source) if rep.source is not None
                   else {"available": False, "note": ""}),
    }


def _heat(values: list[list[float | None]]) -> list[list[tuple[float | None, float]]]:
    """Each cell with its intensity 0..1 against the whole grid's range."""
    flat = [v for row in values for v in row if v is not None]
    lo, hi = (min(flat), max(flat)) if flat else (0.0, 0.0)
    span = (hi - lo) or 1.0
    return [[(v, 0.0 if v is None else (v - lo) / span) for v in row] for row in values]


def _job_context(rep: Report) -> dict[str, Any]:
    """What the job page shows: the job's JSON result, its findings as the single-trace page
    formats them, and the rank-by-step heatmaps."""
    from advisor.report.job_view import job_dict, rank_ranges

    d = job_dict(rep)
    n = len(d["step_ranks"])

    def grid(key: str) -> list[list[tuple[float | None, float]]]:
        return _heat([[st[key][i] for st in d["steps"]] for i in range(n)])

    job = rep.job
    assert job is not None
    drawn = job_timeline(job)
    return {
        "d": d, "report": {"skipped": d["skipped"]}, "trace": {"path": rep.trace.path,
                                                                "format": rep.trace.format},
        "advisor_version": advisor_version(),
        "findings": [{**view.finding_view(f, d["job"]["median_step_ms"], []),
                      "ranks_text": rank_ranges(f["ranks"])} for f in d["findings"]],
        "below_threshold": rep.below_threshold,
        "steps": {"analysed": len(d["steps"])},
        "source": {"findings": {}}, "timeline": drawn.data, "legend": view.legend(drawn.data),
        "timeline_sub": _timeline_sub(drawn), "timeline_empty": f"No timeline: {drawn.note}.",
        "baseline_ms": d["job"]["median_step_ms"],
        "skipped": rep.skipped_by_reason(),
        "exposed_ms": job.exposed_ns / 1e6,
        "ranks": d["step_ranks"], "straggler": job.straggler_rank, "rank_ranges": rank_ranges,
        "heatmaps": [("Step time per rank and step", grid("rank_step_ms"), "33, 102, 172"),
                     ("Own work per rank and step (the step less the waiting for other ranks)",
                      grid("rank_own_work_ms"), "23, 128, 61"),
                     ("Exposed communication per rank and step", grid("rank_exposed_comm_ms"),
                      "196, 90, 17"),
                     ("Waiting for other ranks per rank and step", grid("rank_waiting_ms"),
                      "176, 0, 32")],
    }


def _timeline_sub(drawn: JobTimeline) -> str:
    """The job timeline's heading: which step, and each rank drawn with its step time."""
    if drawn.data is None:
        return ""
    ranks = " and ".join(f"rank {d.rank} ({d.role})" for d in drawn.ranks)
    return (f"step {drawn.step_index}, the aligned step closest to the median · {ranks}, "
            "each from its step's start on the host")


def render_html(source: Report | Analysis) -> str:
    """The report as one HTML document (a report built with its timeline, or an analysis; a
    job's report as the job page)."""
    env = _environment()
    script = _asset("timeline.js")
    if isinstance(source, Report) and source.job is not None:
        return env.get_template("job.html.j2").render(
            **_job_context(source), css=Markup(_asset("report.css") + "\n" + palette.css_rules()),
            script=Markup(script), script_hash=_csp_hash(script))
    return env.get_template("report.html.j2").render(
        **_context(as_report(source, timeline=True)),
        css=Markup(_asset("report.css") + "\n" + palette.css_rules()),
        script=Markup(script),
        script_hash=_csp_hash(script),
    )


def write_html(source: Report | Analysis, path: str | Path) -> None:
    """Write the report; a failed write is an `OutputError`, never a silent pass."""
    text = render_html(source)
    write_atomic(path, text)
