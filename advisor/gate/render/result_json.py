"""The verdict as JSON (``--json FILE``): a versioned contract for bots that post or track it.

``gate_schema_version`` changes its major number on any incompatible change; keys are only ever
added within a major version. Times are milliseconds per steady step.
"""

from __future__ import annotations

from typing import Any

from advisor.gate.attribution import Change
from advisor.gate.compare import GateResult
from advisor.gate.inputs import GateInput
from advisor.gate.tried import TRIED_SOURCE

GATE_SCHEMA_VERSION = "1.0"


def _run(x: GateInput) -> dict[str, Any]:
    return {"path": x.path, "kind": x.kind, "format": x.trace_format, "gpus": list(x.gpus),
            "steady_steps": len(x.step_times_ms),
            "steady_steps_held": max(x.steps_held, len(x.step_times_ms)), "median_ms": round(x.median_ms, 4),
            "step_ms": round(x.step_ms, 4)}


def _tried(x: GateInput) -> dict[str, Any] | None:
    """A run's measured fixes (`advisor profile --try`); None when it is not a --try result."""
    if x.tried is None:
        return None
    t = x.tried
    return {
        "rounds": t.rounds, "plain_step_ms": list(t.plain_ms), "plain_steps": len(t.plain_steps_ms),
        "fixes": [{"label": f.label, "knobs": list(f.knobs), "rules": list(f.rules),
                   "codes": list(f.codes), "status": f.status, "reason": f.reason,
                   "measured_speedup": f.measured, "measured_low": f.measured_low,
                   "measured_high": f.measured_high, "runs": f.runs, "step_ms": f.step_ms,
                   "estimated_speedup": f.estimated, "changes_numerics": f.numerics,
                   "combination": f.combination, "improvement": f.improvement}
                  for f in t.fixes],
        "improvements": [f.label for f in t.improvements],
    }


def _changes(rows: tuple[Change, ...]) -> list[dict[str, Any]]:
    return [{"name": c.name, "baseline": round(c.base, 6), "candidate": round(c.cand, 6),
             "delta": round(c.delta, 6)} for c in rows]


def to_gate_dict(result: GateResult) -> dict[str, Any]:
    t, a = result.timing, result.attribution
    gpu = tuple(x for x in (a.gpu_busy_ms, a.gpu_idle_ms) if x is not None)
    return {
        "gate_schema_version": GATE_SCHEMA_VERSION,
        "status": result.status,
        "exit_code": int(result.exit_code),
        "threshold": result.policy.threshold,
        "allowed_rules": sorted(result.policy.allow),
        "baseline": _run(result.baseline),
        "candidate": _run(result.candidate),
        "step_time": {
            "verdict": t.verdict, "change": round(t.change, 6), "shift_ms": round(t.shift_ms, 6),
            "baseline_median_ms": round(t.base_median_ms, 4),
            "candidate_median_ms": round(t.cand_median_ms, 4),
            "p_slower": t.test.p_greater, "p_faster": t.test.p_less, "exact_test": t.test.exact,
            "source": "tried" if t.source == TRIED_SOURCE else "profiled",
            "baseline_steps": t.n_base, "candidate_steps": t.n_cand,
        },
        "tried": {"baseline": _tried(result.baseline), "candidate": _tried(result.candidate)},
        "host_noise": None if result.host_noise is None else {
            "is_noise": result.host_noise.is_noise, "reasons": list(result.host_noise.reasons)},
        "regressions": [{"kind": r.kind, "summary": r.summary, "rules": list(r.rules),
                         "codes": list(r.codes), "allowed": r.allowed} for r in result.regressions],
        "findings": [{"rule": f.rule, "code": f.code, "status": f.status,
                      "baseline_saved_ms": round(f.base_saved_ms, 4),
                      "candidate_saved_ms": round(f.cand_saved_ms, 4), "message": f.message}
                     for f in result.findings],
        "signals": [{"rule": s.rule, "what": s.what, "baseline": s.base, "candidate": s.cand}
                    for s in result.signals],
        "attribution": {
            "gpu_ms": _changes(gpu), "categories_ms": _changes(a.categories_ms),
            "kernels_ms": _changes(a.kernels_ms), "counts": _changes(a.counts),
            "phases_ms": _changes(a.phases_ms), "idle_causes_ms": _changes(a.idle_causes_ms),
        },
        "inconclusive": list(result.inconclusive),
        "notes": list(result.notes),
    }


def error_dict(message: str) -> dict[str, Any]:
    """The JSON verdict when the runs could not be compared at all."""
    return {"gate_schema_version": GATE_SCHEMA_VERSION, "status": "inconclusive", "exit_code": 2,
            "error": message}
