"""One finding's JSON record, shared by the single-trace result and a job's (`advisor.report.job_view`).

Its own module so that both results import it from below: the job view renders through the same
records without the JSON report and the job view importing each other.
"""

from __future__ import annotations

from typing import Any

from advisor.engine.floors import Floor
from advisor.engine.rule import Finding, Validation, validation_text
from advisor.report.model import ReportFinding
from advisor.report.units import to_ms as _ms


def finding_dict(rf: ReportFinding) -> dict[str, Any]:
    """One finding's record (a job's findings add their ranks, `advisor.report.job_view`)."""
    f = rf.finding
    e = f.estimate
    return {
        "rule": f.rule,
        "code": f.code,
        "category": rf.category,
        "message": f.message,
        "confidence": f.confidence.value,
        "estimated_speedup": round(e.speedup, 4),
        "speedup_low": round(e.low, 4),
        "speedup_high": round(e.high, 4),
        "predicted_step_ms": _ms(e.predicted_step_ns),
        "saved_ms_per_step": _ms(e.saved_ns_per_step),
        # Set when the steps cannot carry an estimate: the numbers above are then the model's
        # replay with a range widened down to no gain, not a prediction to rely on.
        "estimate_withheld": e.withheld,
        "relative_to": e.relative_to,
        "step_ms": _ms(e.step_ns),
        "model": e.model,
        "assumptions": list(e.assumptions),
        "evidence": {
            "steps": list(f.evidence.steps),
            "kernels": list(f.evidence.kernels),
            "ranges": list(f.evidence.ranges),
            "api_calls": list(f.evidence.api_calls),
            "node_ids": list(f.evidence.node_ids),
            "quantities": {k: float(v) for k, v in f.evidence.quantities.items()},
        },
        "fix": {
            "title": f.fix.title,
            "snippet": f.fix.snippet,
            "kind": f.fix.kind,
            "requires": list(f.fix.requires),
            "mechanism": f.fix.mechanism,
            "framework": f.fix.framework,
        },
        # Causal precedence: the estimate is this fix's gain once that finding is fixed.
        "conditional_on": f.conditional_on,
        "explained_by": f.explained,
        # A conditional finding's fix applied on its own: what --try measures and what the
        # findings are ordered by (issue 33).
        "alone": _alone(f),
        # The step's highest floor after the fix (kernels that stay, host time that stays,
        # the loader's supply): no estimate goes below it.
        "floor": _floor(e.floor, e.floor_binds),
        # Whether the rule's estimate was checked out of sample (issue 35): an unvalidated
        # rule's number is the model's alone, and every view says so.
        "validation": validation_dict(f.validation),
    }


def _alone(f: Finding) -> dict[str, Any] | None:
    a = f.alone
    if a is None:
        return None
    return {"estimated_speedup": round(a.speedup, 4), "speedup_low": round(a.low, 4),
            "speedup_high": round(a.high, 4), "predicted_step_ms": _ms(a.predicted_step_ns)}


def validation_dict(v: Validation | None) -> dict[str, Any]:
    """The finding's validation label and, when validated, the check it rests on."""
    check = None if v is None else {"shape": {k: x for k, x in v.shape.items()},
                                    "measured_speedup": v.measured, "runs": v.runs}
    return {"validated": v is not None, "label": validation_text(v), "check": check}


def _floor(floor: Floor | None, binds: bool = False) -> dict[str, Any] | None:
    if floor is None:
        return None
    return {"kind": floor.kind, "ms": _ms(floor.ns), "what": floor.what, "holds_estimate": binds}


def below_dict(f: Finding) -> dict[str, Any]:
    return {"rule": f.rule, "code": f.code, "estimated_speedup": round(f.estimate.speedup, 4),
            "saved_ms_per_step": _ms(f.estimate.saved_ns_per_step)}
