"""The job page's timeline: the straggler's step and a typical rank's, drawn by the single-trace
timeline's code, on the H200 2-GPU captures (fixtures/jobs/).

What is drawn is checked against the job's own numbers for the same rank and step, which the
slim reader summarised from the same trace (`advisor.engine.rank_summary.StepSummary`): the GPU step's
span, the GPU's idle time, the communication kernels' time and the phases. A timeline of the
wrong step, the wrong rank, or events shifted out of their step disagrees with them.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor.engine.job_model import Job, build_job
from advisor.graph.intervals import merge
from advisor.ingest.base import LoadOptions
from advisor.job.api import run_rules
from advisor.job.cluster import summarize_file
from advisor.job.inputs import assign_ranks, expand_inputs
from advisor.report.html_report import render_html
from advisor.report.job_report import build_job_report
from advisor.report.job_timeline import HALF_CAPS, job_timeline
from advisor.report.timeline_view import Caps
from tests.conftest import ROOT

RUNS = ROOT / "fixtures" / "jobs"
CASES = ["h200x2-ddp/torch/slow-rank", "h200x2-ddp-b32/torch/slow-rank",
         "h200x2-ddp/torch/accum-sync", "h200x2-ddp/nsys/slow-rank.sqlite.gz"]


def _job(case: str) -> Job:
    """The job of one capture, each rank summarised in this process (no cluster needed)."""
    files, _ = expand_inputs([RUNS / case])
    return run_rules(build_job(assign_ranks([
        s for i, f in enumerate(files) for s in summarize_file(str(f), i, LoadOptions())])))


UNCAPPED = Caps(gpu_ops=10**6, ranges=10**6, api_calls=10**6, gaps=10**6, threads=64)
"""Everything drawn: the page caps what it embeds (the shortest gaps and ops merged or left out,
and said so), which the sums below would have to allow for."""


@pytest.fixture(scope="module", params=CASES)
def drawn(request):
    job = _job(request.param)
    rep = build_job_report(job)
    return job, rep, job_timeline(rep.job, caps=UNCAPPED)


def _rank_lanes(data: dict, rank: int) -> list[dict]:
    prefix = f"rank {rank} ("
    return [lane for lane in data["lanes"] if data["groups"][lane["group"]]["title"].startswith(prefix)]


def _spans(data: dict, lanes: list[dict], kind: str, cls: str | None = None) -> list[tuple[int, int]]:
    return [(e[0], e[0] + e[1]) for lane in lanes if lane["kind"] == kind for e in lane["ev"]
            if cls is None or data["classes"][e[3]] == cls]


def test_the_straggler_and_a_typical_rank_are_drawn(drawn):
    job, _, tl = drawn
    assert tl.data is not None, tl.note
    ranks = [d.rank for d in tl.ranks]
    assert ranks[0] == (job.straggler.rank if job.straggler else ranks[0])
    assert tl.ranks[0].role == ("straggler" if job.straggler else "slowest")
    assert sorted(ranks) == sorted(job.rank_ids)  # two ranks: the other one is the typical one
    titles = {g["title"].split(" · ")[0] for g in tl.data["groups"]}
    assert titles == {f"rank {d.rank} ({d.role})" for d in tl.ranks}


def test_the_drawn_steps_match_the_jobs_numbers(drawn):
    job, _, tl = drawn
    assert tl.data is not None, tl.note
    data = tl.data
    for d in tl.ranks:
        summary = job.rank_steps[d.rank][tl.step_index]
        lanes = _rank_lanes(data, d.rank)
        (gpu_step,) = [e for lane in lanes if lane["kind"] == "step" and lane["title"] == "GPU"
                       for e in lane["ev"]]
        assert gpu_step[1] == summary.time_ns  # the step's GPU span, to the nanosecond
        lo, hi = gpu_step[0], gpu_step[0] + gpu_step[1]
        idle = sum(b - a for a, b in _spans(data, lanes, "idle"))
        assert idle == summary.idle_ns
        comm = merge((max(a, lo), min(b, hi)) for a, b in _spans(data, lanes, "gpu", "k-communication")
                     if b > lo and a < hi)
        assert sum(b - a for a, b in comm) == pytest.approx(summary.comm_ns, rel=0.01, abs=20_000)
        if summary.phase_ns:
            phases = sum(b - a for a, b in _spans(data, lanes, "phase"))
            assert phases == pytest.approx(sum(summary.phase_ns.values()), rel=0.001)


def test_both_steps_start_at_the_same_place_on_the_axis(drawn):
    _, _, tl = drawn
    data = tl.data
    starts = {d.rank: next(e[0] for lane in _rank_lanes(data, d.rank)
                           if lane["kind"] == "step" and lane["title"] == "host" for e in lane["ev"])
              for d in tl.ranks}
    assert len(set(starts.values())) == 1 and data["step"]["cpu"][0] in starts.values()


def test_launch_links_stay_within_one_rank(drawn):
    """Each trace numbers its own events: the second rank's are moved past the first's, so a
    kernel's launch link (the id of its API call) finds the call of its own rank."""
    _, _, tl = drawn
    data = tl.data
    owner = {}
    for lane in data["lanes"]:
        rank = data["groups"][lane["group"]]["title"].split(" (")[0]
        for e in lane["ev"]:
            if lane["kind"] == "api" and e[4] >= 0:
                assert owner.setdefault(e[4], rank) == rank
    for lane in data["lanes"]:
        rank = data["groups"][lane["group"]]["title"].split(" (")[0]
        for e in lane["ev"]:
            if lane["kind"] == "gpu" and e[5] in owner:
                assert owner[e[5]] == rank


def test_the_job_page_embeds_the_timeline_and_its_script(drawn):
    _, rep, tl = drawn
    html = render_html(rep)
    data = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', html, re.S)
    assert data
    shown = json.loads(data.group(1))
    assert shown["span_ns"] == tl.data["span_ns"]
    # two steps in the room of one: a rank over half the single-trace page's cap on GPU ops has
    # its shortest merged into blocks, and the page says so
    for d in tl.ranks:
        def gpu_events(data: dict, rank: int = d.rank) -> int:
            return sum(len(lane["ev"]) for lane in _rank_lanes(data, rank) if lane["kind"] == "gpu")
        if gpu_events(tl.data) > HALF_CAPS.gpu_ops:
            assert gpu_events(shown) < gpu_events(tl.data)
            assert any(t.startswith(f"rank {d.rank} (") and "over the cap of 3,000" in t
                       for t in shown["trimmed"])
    assert 'id="tl-svg"' in html and "script-src 'sha256-" in html
    assert f"step {tl.step_index}, the aligned step closest to the median" in html


def test_a_trace_that_cannot_be_read_leaves_a_note_not_an_error():
    rep = build_job_report(_job(CASES[0]))

    def unreadable(path: str):
        raise OSError(f"no such file: {path}")

    tl = job_timeline(rep.job, load=unreadable)
    assert tl.data is None and "could not be read here" in tl.note
