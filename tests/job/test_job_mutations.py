"""The job rules' tests can fail (issue 35): each mutation of a job rule's detection or saving is
applied in-process and the check that tests/job/test_load_imbalance.py and
tests/job/test_h200x2_traces.py apply must then fail on the same ranks.

The straggler's GPU-side saving (what closing its extra GPU busy time gives back) is the one
mutation no capture on record catches: every straggler there is one whose extra work is host
work (the synthetic ranks are host-bound; the H200 runs' slow rank makes its batches on the
host), so halving it moves the estimates by 0-2% (docs/validation.md lists the capture to take).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from advisor.engine.job_model import build_job
from advisor.job.rule import run_job_rules
from tests.conftest import ROOT, session_scheduler
from tests.job.test_load_imbalance import imbalance_miss
from tests.job.test_straggler_saving import mfu_job, straggler_miss

RUNS = ROOT / "fixtures" / "jobs"
BAND = 1.35  # tests/job/test_h200x2_traces.py's band on the straggler's estimate / measured


def _delete_load_imbalance(mp: pytest.MonkeyPatch) -> None:
    import advisor.rules.job.load_imbalance as li

    mp.setattr(li.LoadImbalance, "check", lambda self, job, ctx: iter(()))


def _halve_saving(module: str, which: str) -> Callable[[pytest.MonkeyPatch], None]:
    """Halve the mid estimate's saving the module's rule passes to ``ctx.finding`` (the estimate
    API, `advisor.engine.estimates`): ``gpu`` the ranks' own GPU-side work, ``host`` their host
    floors, ``both``."""
    def apply(mp: pytest.MonkeyPatch) -> None:
        import importlib
        from dataclasses import replace

        from advisor.engine.job_whatif import JobContext
        from advisor.job.rule import JobRule

        mod = importlib.import_module(module)
        cls = next(v for v in vars(mod).values() if isinstance(v, type)
                   and issubclass(v, JobRule) and v is not JobRule)
        orig = JobContext.finding

        def half(s):
            return None if s is None else (lambda r, st: 0.5 * s(r, st))

        def halved(self, rule, message, evidence, effects, *args, **kw):
            if rule is cls:
                kw.setdefault("low_effects", effects)  # the variants keep the unmutated saving
                kw.setdefault("high_effects", effects)
                effects = tuple(replace(e, gpu=half(e.gpu) if which in ("gpu", "both") else e.gpu,
                                        host=half(e.host) if which in ("host", "both") else e.host)
                                for e in effects)
            return orig(self, rule, message, evidence, effects, *args, **kw)

        mp.setattr(JobContext, "finding", halved)
    return apply


def _imbalance_caught(summaries) -> bool:
    job = build_job(summaries)
    return imbalance_miss(job, {f.rule: f for f in run_job_rules(job)}) is not None


def _straggler_caught(_summaries) -> bool:
    """The H200 runs' slow-rank estimates leave the band around the measured speedup."""
    from advisor.job.api import analyze_job

    caught = False
    for run, path in (("h200x2-ddp", "torch/slow-rank"), ("h200x2-ddp", "nsys/slow-rank.sqlite.gz"),
                      ("h200x2-ddp-b32", "torch/slow-rank")):
        ms = json.loads((RUNS / run / "measured.json").read_text())["step_ms"]
        j = analyze_job([RUNS / run / path], scheduler=session_scheduler(), rank_rules="none")
        f = next((x for x in j.findings if x.rule == "straggler-rank"), None)
        ratio = f.estimate.speedup / (ms["slow-rank"] / ms["slow-rank-fixed"]) if f else 0.0
        caught |= not 1 / BAND <= ratio <= BAND
    return caught


def _gpu_bound_straggler_caught(_summaries) -> bool:
    return straggler_miss(mfu_job()) is not None


MUTATIONS = {
    "load-imbalance deleted": (_delete_load_imbalance, _imbalance_caught),
    "load-imbalance saving halved": (_halve_saving("advisor.rules.job.load_imbalance", "both"),
                                     _imbalance_caught),
    "straggler-rank saving halved": (_halve_saving("advisor.rules.job.straggler_rank", "both"),
                                     _straggler_caught),
    "straggler-rank GPU-side saving halved": (_halve_saving("advisor.rules.job.straggler_rank", "gpu"),
                                              _gpu_bound_straggler_caught),
}
NOT_CAUGHT: dict[str, str] = {}
"""Mutations no check catches yet (strict xfails, with why); none today."""


_UNMUTATED: dict[Callable, bool] = {}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_job_rule_mutation_fails_a_check(name, imbalanced_summaries, monkeypatch, request):
    if name in NOT_CAUGHT:
        request.applymarker(pytest.mark.xfail(reason=NOT_CAUGHT[name], strict=True))
    mutate, caught = MUTATIONS[name]
    if caught not in _UNMUTATED:  # the same for every mutation checked this way: once a session
        _UNMUTATED[caught] = caught(imbalanced_summaries)
    assert not _UNMUTATED[caught], f"{name}: the unmutated rules already miss"
    with monkeypatch.context() as mp:
        mutate(mp)
        assert caught(imbalanced_summaries), f"{name}: no check notices"
