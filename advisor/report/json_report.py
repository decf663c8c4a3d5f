"""The JSON result: the versioned, schema-checked contract for machines (CI, `advisor gate`).

It serialises the report model (`advisor.report.model`) and computes nothing of its own.

The schema is `advisor/report/schema.json` (JSON Schema draft 2020-12); `SCHEMA_VERSION` changes
its major number on any incompatible change. Times are milliseconds (``*_ms``), as users read
them; the graph's nanoseconds stay inside.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from advisor import DISTRIBUTION
from advisor.analysis import Analysis
from advisor.engine.rule import Estimate
from advisor.engine.step_basis import StepBasis
from advisor.graph.trace_summary import TraceSummary
from advisor.output_paths import write_atomic
from advisor.report import signing, source_view
from advisor.report.finding_record import _floor, below_dict, finding_dict
from advisor.report.model import Report, as_report
from advisor.report.tried import to_json as tried_json
from advisor.report.units import to_ms as _ms
from advisor.safe_text import json_text

SCHEMA_VERSION = "1.2"  # 1.1: steps.detection, baseline_step_ms, estimate_withheld;
# 1.2: framework, fix.mechanism/fix.framework, conditional_on/explained_by; steps.measured:
# baseline_ms (the mean), bursty, burst_cause, window, noisy_host (optional, additive); the
# optional ``tried`` (written only by `advisor profile --try`); findings[].alone (optional)
SCHEMA_PATH = Path(__file__).with_name("schema.json")


def advisor_version() -> str:
    # imported here: importlib.metadata (and the email package under it) is 30 ms of the
    # start-up of an `advisor analyze` that writes no JSON (issue #39)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


def _combination(combined: Estimate | None) -> dict[str, Any] | None:
    """All step fixes together as a path: each fix after the ones before it (a conditional
    one right after the fix it depends on), the step after it and the floor there."""
    if combined is None:
        return None
    return {
        "path": [{"rule": p.rule, "after": p.after, "predicted_step_ms": _ms(p.predicted_step_ns),
                  "floor": _floor(p.floor)} for p in combined.path],
        "floor": _floor(combined.floor, combined.floor_binds),
    }


def _framework(fw) -> dict[str, Any] | None:
    if fw is None:
        return None
    return {"name": fw.name, "label": fw.label, "source": fw.source, "evidence": list(fw.evidence),
            "compiled": fw.compiled, "cuda_graphs": fw.cuda_graphs, "markers": list(fw.markers)}


def _detection(basis: StepBasis | None) -> dict[str, Any] | None:
    if basis is None:
        return None
    return {
        "method": basis.method,
        "detail": basis.detail,
        "pid": basis.pid,
        "tid": basis.tid,
        "process": basis.process,
        "chosen_by": basis.chosen_by,
        "first": basis.first,
        "last": basis.last,
        "confidence": basis.confidence,
        "spread_cv": None if basis.spread_cv is None else round(basis.spread_cv, 4),
        "warmup_evidence": basis.warmup_evidence,
        "description": basis.describe(),
    }


def _whole_trace(t: TraceSummary | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "span_ms": _ms(t.span_ns),
        "devices": t.devices,
        "gpu_busy_ms": _ms(t.busy_ns),
        "gpu_idle_ms": _ms(t.idle_ns),
        "gpu_busy_share": None if t.busy_share is None else round(t.busy_share, 4),
        "kernels": t.kernels,
        "top_kernels": [{"name": k.name, "category": k.category, "count": k.count,
                         "ms": _ms(k.total_ns)} for k in t.top_kernels],
        "by_category_ms": {k: _ms(v) for k, v in t.category_ns.items()},
        "sync_calls": t.sync_calls,
        "sync_ms": _ms(t.sync_ns),
        "copies": [{"kind": c.kind, "count": c.count, "bytes": c.bytes, "ms": _ms(c.total_ns)}
                   for c in t.copies],
        "communication_share": None if t.communication_share is None
        else round(t.communication_share, 4),
    }


def to_dict(source: Report | Analysis) -> dict[str, Any]:
    """The JSON result of a report (or of an analysis, built into its report first)."""
    rep = as_report(source)
    if rep.job is not None:  # a distributed job: the ``advisor-job`` result
        from advisor.report.job_view import job_dict

        return job_dict(rep)
    info, st, replay = rep.trace, rep.steps, rep.replay
    combined = rep.combined
    gm = st.metrics
    times = st.analysed_times_ns
    basis = st.basis
    baseline_ms = _ms(rep.baseline_step_ns)
    return _with_tried({
        "schema_version": SCHEMA_VERSION,
        "advisor_version": advisor_version(),
        "trace": {
            "path": info.path,
            "format": info.format,
            "schema_version": info.schema_version,
            "tool_version": info.tool_version,
            "gpus": [
                {"device": x.device, "name": x.name, "sm_count": x.sm_count,
                 "memory_bytes": x.memory_bytes, "compute_capability": x.compute_capability}
                for x in info.gpus
            ],
            "software": dict(info.software),
            "totals": dict(info.totals),
            "window_ms": None if info.window_ns is None else [_ms(info.window_ns[0]),
                                                              _ms(info.window_ns[1])],
            "has_gpu_work": rep.has_gpu_work,
            "notes": list(info.notes),
        },
        "steps": {
            "count": st.count,
            "source": st.source.value,
            # Which process and steps, how they were found, and whether they carry estimates.
            "detection": _detection(basis),
            # The report's one step time: every estimate's step_ms, the HTML's, the console's.
            "baseline_ms": baseline_ms,
            "warmup": st.warmup,
            "analysed": st.analysed,
            "median_ms": _ms(st.median_ns),
            "mean_ms": _ms(st.mean_ns),
            "min_ms": _ms(min(times)) if times else None,
            "max_ms": _ms(max(times)) if times else None,
            "times_ms": [_ms(m.time_ns) for m in st.marks],
            "gpu_busy_ms": _ms(st.busy_median_ns),
            # The steps replayed without the tracing profiler's host overhead: what the program
            # takes when it is not being traced (see model_check.profiler_overhead_ms).
            "unprofiled_median_ms": _ms(replay.unprofiled_median_ns),
            "unprofiled_mean_ms": _ms(replay.unprofiled_mean_ns),
            "gpu_idle_ms": _ms(st.median_ns - st.busy_median_ns) if times else None,
            "idle_causes_ms": {k: _ms(v) for k, v in st.idle_causes_ns.items()},
            "phases": {k: _ms(v) for k, v in st.phases_ns.items()},
            # For `advisor gate` (optional keys, added in 1.0): see advisor/graph/step_metrics.py.
            "steady_times_ms": [_ms(t) for t in gm.steady_times_ns],
            "gpu_busy_times_ms": [_ms(t) for t in gm.gpu_busy_ns],
            "counts_per_step": {k: round(v, 3) for k, v in gm.counts.items()},
            "launch_interval_ms": {k: round(v / 1e6, 6) for k, v in gm.launch_interval_ns.items()},
            "ops_per_step": {k: round(v, 3) for k, v in gm.ops.items()},
            # `advisor profile` only: the unprofiled steps timed by the host clock at each
            # step boundary outside the recorded window (null for a bare trace).
            "measured": st.measured.to_dict() if st.measured is not None else None,
        },
        # `advisor profile` only: where the whole run's wall time went (null for a bare trace).
        "run": rep.run.to_dict() if rep.run is not None else None,
        "warnings": list(rep.warnings),
        # Host time, GPU idle, phases and findings by the user's source lines (source_view).
        "source": source_view.to_json(rep.source) if rep.source is not None else None,
        "framework": _framework(rep.framework),
        "kernels": {
            "by_category_ms": {k: _ms(v) for k, v in rep.kernel_category_ns.items()},
            "top": [
                {"name": k.name, "category": k.category, "count_per_step": k.count,
                 "ms_per_step": _ms(k.total_ns)}
                for k in rep.top_kernels
            ],
            "all": [
                {"name": k.name, "category": k.category, "count_per_step": round(k.count_per_step, 3),
                 "ms_per_step": round(k.ns_per_step / 1e6, 6),
                 "shapes": {g: round(c, 3) for g, c in k.shapes.items()}}
                for k in gm.kernels
            ],
        },
        # Without steps: where the GPU time of the whole loaded trace went (else null).
        "whole_trace": _whole_trace(rep.whole_trace),
        # MFU, tensor-core share, the kernels furthest below their roof (engine/efficiency.py)
        "efficiency": rep.efficiency.to_dict() if rep.efficiency is not None else None,
        # kernels per step, launch-to-start delays, kernel variability (graph/launch_stats.py)
        "launches": rep.launches.to_dict() if rep.launches is not None else None,
        "findings": [finding_dict(f) for f in rep.findings],
        "skipped": [{"rule": x.rule, "reason": x.reason} for x in rep.skipped],
        "below_threshold": [below_dict(f) for f in rep.below_threshold],
        "baseline_step_ms": baseline_ms,
        # the steps' reason first (`step_basis`), else the correction's (`model_check.out_of_range`)
        "estimate_withheld": (basis.withheld if basis is not None else None) or replay.out_of_range,
        "estimated_speedup": round(combined.speedup, 4) if combined else 1.0,
        "predicted_step_ms": _ms(combined.predicted_step_ns) if combined else baseline_ms,
        "combination": _combination(combined),
        "model_check": {
            "replay_error": None if replay.baseline_error is None
            else round(replay.baseline_error, 4),
            # Host time per step the tracing profiler itself added (estimated); speedups are
            # computed with it removed from both sides.
            "profiler_overhead_ms": _ms(replay.profiler_overhead_ns),
            # (unprofiled replay - measured unprofiled step) / measured, under advisor profile
            "measured_vs_replay": None if replay.measured_vs_replay is None
            else round(replay.measured_vs_replay, 4),
            # which per-event profiler costs were taken out of the replay
            "calibration": replay.calibration,
            # traced / unprofiled replayed step, and why the estimates were withheld when that
            # goes beyond the calibration's fitted range (`profiler_cost.out_of_range`)
            "correction_ratio": None if replay.correction_ratio is None
            else round(replay.correction_ratio, 4),
            "out_of_range": replay.out_of_range,
        },
    }, rep)


def _with_tried(out: dict[str, Any], rep: Report) -> dict[str, Any]:
    """``tried``: `advisor profile --try`'s fixes measured on the job beside their estimates;
    the key is absent from every other result."""
    if rep.tried is not None:
        out["tried"] = tried_json(rep.tried)
    return out


def to_json(source: Report | Analysis) -> str:
    """The JSON result as written to a file or stdout (`json_text`: no CI form in a line of a
    CI log, the strings read back raw), signed where ``ADVISOR_RESULT_KEY`` is set
    (`advisor.report.signing`: over the result as a reader parses it back)."""
    text = json_text(json.dumps(to_dict(source), indent=2, sort_keys=False))
    key = signing.result_key()
    if key is None:
        return text
    data = json.loads(text)
    data["signature"] = signing.signature(data, key)
    return json_text(json.dumps(data, indent=2, sort_keys=False))


def write_json(source: Report | Analysis, path: str | Path) -> None:
    write_atomic(path, to_json(source) + "\n")
