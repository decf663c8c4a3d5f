"""The HTML report rendered from real traces: self-contained, escaped, bounded, true to the JSON.

Traces are the shared real ones (see ../shared/traces/SOURCES.md); the hostile one is a real
trace whose names are replaced in memory, as a trace with hostile kernel names or NVTX text
would arrive.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from markupsafe import escape

from advisor.analysis import Analysis, analyze
from advisor.errors import OutputError
from advisor.report.html_report import render_html, write_html
from advisor.report.html_view import quantity, step_ranges
from advisor.report.json_report import to_dict
from advisor.report.timeline_view import Caps, build_timeline, fair_shares, representative_step
from tests.conftest import SCENARIOS, shared

RESNET0 = "kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
ALEXNET = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
OWLV2 = "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz"  # largest JSON trace
MFU_NSYS = "nsys-ai/mfu_2gpu_before.sqlite"

HOSTILE_KERNEL = "<script>alert(1)</script>"
HOSTILE_RANGE = "</script><img src=x onerror=alert(2)>"
HOSTILE_PATH = "/tmp/</script><script>alert(3)</script>/trace.json.gz"
HOSTILE_NOTE = "<b onmouseover=alert(4)>note</b>"
HOSTILE_SNIPPET = "x = '</script><script>alert(5)</script>'"


def hostile_analysis() -> Analysis:
    """A real trace whose kernel name, NVTX text, path, notes and finding text are hostile."""
    a = analyze(shared(RESNET0))
    step = representative_step(a.summary).step
    op = max(a.graph.step_ops(step), key=lambda o: o.duration_ns)  # long: gets a label
    op.name = HOSTILE_KERNEL + op.name
    ranges = a.graph.ranges_in(step.pid, step.tid, step.cpu_start_ns, step.cpu_end_ns)
    rng = sorted(ranges, key=lambda r: -r.duration_ns)[1]  # [0] is the step's own range
    rng.name = HOSTILE_RANGE
    a.graph.info.path = HOSTILE_PATH
    a.graph.info.notes.append(HOSTILE_NOTE)
    f = a.results.findings[0]
    a.results.findings[0] = replace(
        f,
        message=f.message + " <iframe src=//evil.example>",
        evidence=replace(f.evidence, kernels=(HOSTILE_KERNEL,), ranges=(HOSTILE_RANGE,),
                         node_ids=(f"gpu:{op.id}",)),
        fix=replace(f.fix, snippet=HOSTILE_SNIPPET),
    )
    return a


@pytest.fixture(scope="module")
def resnet() -> Analysis:
    return analyze(shared(RESNET0))


@pytest.fixture(scope="module")
def resnet_html(resnet: Analysis) -> str:
    return render_html(resnet)


def embedded(page: str, element_id: str) -> object:
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', page, re.S)
    assert m, element_id
    return json.loads(m.group(1))


def test_report_fetches_nothing_and_allows_only_its_own_script(resnet_html: str) -> None:
    assert re.findall(r"<script\b", resnet_html) == ["<script"] * 3  # 2 JSON blocks + our code
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", resnet_html)
    assert "@import" not in resnet_html and "url(http" not in resnet_html
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', resnet_html)
    assert csp and "default-src 'none'" in csp.group(1) and "script-src 'sha256-" in csp.group(1)


def test_embedded_json_is_the_json_report(resnet: Analysis, resnet_html: str) -> None:
    assert embedded(resnet_html, "advisor-report") == json.loads(json.dumps(to_dict(resnet)))


def test_headline_shows_step_busy_speedup_and_environment(resnet: Analysis, resnet_html: str) -> None:
    d = to_dict(resnet)
    text = html.unescape(re.sub(r"<[^>]+>", " ", resnet_html))
    assert f"{d['steps']['median_ms']:.4g} ms" in text  # median step, 175.2 ms
    assert f"{d['estimated_speedup']:.2f}×" in text
    assert f"{d['predicted_step_ms']:.4g} ms" in text
    assert "Tesla V100-DGXS-32GB" in text and "torch.profiler (Kineto)" in text
    busy = d["steps"]["gpu_busy_ms"] / d["steps"]["median_ms"]
    assert f"{busy * 100:.0f}%" in text


def test_findings_are_in_speedup_order_with_fix_and_model(resnet: Analysis, resnet_html: str) -> None:
    rules = re.findall(r'<article class="card finding" id="[^"]+" data-rule="([^"]+)"', resnet_html)
    assert rules == [f.rule for f in resnet.results.findings] and rules
    for f in resnet.results.findings:
        assert str(escape(f.fix.snippet)) in resnet_html
        assert str(escape(f.estimate.model)) in resnet_html


def test_hostile_trace_text_is_escaped_everywhere() -> None:
    page = render_html(hostile_analysis())
    assert re.findall(r"<script\b", page) == ["<script"] * 3
    for raw in ("<script>alert", "<img", "<iframe", "<b onmouseover", "</script><"):
        assert raw not in page, raw
    assert str(escape(HOSTILE_KERNEL)) in page  # evidence list, as text
    assert str(escape(HOSTILE_SNIPPET)) in page  # the fix snippet, as code text
    timeline = embedded(page, "timeline-data")
    assert any(n.startswith(HOSTILE_KERNEL) for n in timeline["names"])
    assert HOSTILE_RANGE in timeline["names"]
    assert embedded(page, "advisor-report")["trace"]["path"] == HOSTILE_PATH


def test_trace_without_steps_says_so_instead_of_a_timeline() -> None:
    page = render_html(analyze(shared(ALEXNET)))
    assert "none in steady state" in page
    assert "No steady-state step to draw." in page
    assert embedded(page, "timeline-data") is None
    assert 'id="skipped"' in page


def test_nsys_export_renders_with_gpu_streams() -> None:
    page = render_html(analyze(shared(MFU_NSYS)))
    timeline = embedded(page, "timeline-data")
    assert any(lane["kind"] == "gpu" and lane["ev"] for lane in timeline["lanes"])


def test_largest_trace_gives_a_small_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    write_html(analyze(shared(OWLV2)), out)
    size = out.stat().st_size
    assert size < 2_500_000, size
    timeline = embedded(out.read_text(encoding="utf-8"), "timeline-data")
    assert timeline["trimmed"]  # 90k ranges: trimmed, and the page says so


def test_timeline_caps_merge_and_say_so(resnet: Analysis) -> None:
    caps = Caps(gpu_ops=200, ranges=150, api_calls=100, gaps=120)
    t = build_timeline(resnet, caps)
    by_kind: dict[str, list] = {}
    for lane in t["lanes"]:
        by_kind.setdefault(lane["kind"], []).extend(lane["ev"])
    single_ops = [e for e in by_kind["gpu"] if e[6] == 1]
    merged = [e for e in by_kind["gpu"] if e[6] > 1]
    assert len(single_ops) <= caps.gpu_ops + len(merged) and merged
    assert len(by_kind["range"]) <= caps.ranges
    assert len(by_kind["api"]) <= caps.api_calls
    assert len(by_kind["idle"]) <= caps.gaps
    assert any("merged" in note for note in t["trimmed"])
    assert len(t["trimmed"]) >= 3


def test_timeline_draws_the_median_step_and_its_idle_blame(resnet: Analysis) -> None:
    rep = representative_step(resnet.summary)
    median = resnet.summary.median_step_ns
    assert all(abs(rep.time_ns - median) <= abs(b.time_ns - median) for b in resnet.summary.steps)
    t = build_timeline(resnet)
    assert t["step"]["index"] == rep.step.index
    idle_ns = sum(e[1] for lane in t["lanes"] if lane["kind"] == "idle" for e in lane["ev"])
    assert idle_ns == sum(rep.idle_causes.values())  # the picture and the idle table agree
    events = [e for lane in t["lanes"] for e in lane["ev"]]
    assert all(e[0] >= 0 and e[0] + e[1] <= t["span_ns"] for e in events)


def test_findings_evidence_is_never_merged_away(resnet: Analysis) -> None:
    step = representative_step(resnet.summary).step
    shortest = sorted(resnet.graph.step_ops(step), key=lambda o: o.duration_ns)[:20]
    cited = tuple(f"gpu:{o.id}" for o in shortest)
    f = resnet.results.findings[0]
    citing = replace(resnet, results=replace(resnet.results, findings=[
        replace(f, evidence=replace(f.evidence, node_ids=cited))]))
    t = build_timeline(citing, Caps(gpu_ops=50))
    drawn = {f"gpu:{e[4]}" for lane in t["lanes"] if lane["kind"] == "gpu" for e in lane["ev"] if e[6] == 1}
    assert set(cited) <= drawn
    assert any(e[6] > 1 for lane in t["lanes"] if lane["kind"] == "gpu" for e in lane["ev"])


def test_failed_write_is_one_line_output_error(resnet: Analysis, tmp_path: Path) -> None:
    with pytest.raises(OutputError) as err:
        write_html(resnet, tmp_path / "no" / "such" / "dir" / "r.html")
    assert "\n" not in str(err.value) and "r.html" in str(err.value)


def test_analyze_command_writes_the_html(tmp_path: Path) -> None:
    from advisor.cli import main

    out = tmp_path / "r.html"
    assert main(["analyze", str(shared(RESNET0)), "--html", str(out), "-q"]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("gpu_idle_share", 0.4383, ("GPU idle share", "43.8%")),
    ("copy_bytes_per_step", 19267840.0, ("Copy bytes", "19.3 MB / step")),
    ("host_wait_ns_per_step", 1_910_200.0, ("Host wait time", "1.91 ms / step")),
    ("achieved_gb_per_s", 10.087, ("Achieved bandwidth", "10.1 GB/s")),
    ("kernels_per_step", 1462.0, ("Kernels", "1,462 / step")),
    ("median_kernel_ns", 2000.0, ("Median kernel time", "2 µs")),
    ("step_time_cv", 0.032, ("Step time CV", "3.2%")),
    ("outlier_steps", 0.0, ("Outlier steps", "0")),
])
def test_quantities_are_formatted_by_their_unit_suffix(key: str, value: float,
                                                       expected: tuple[str, str]) -> None:
    assert quantity(key, value) == expected


def test_embed_budget_is_shared_fairly_between_threads() -> None:
    assert fair_shares([10, 5000, 3000], 4000) == [10, 1995, 1995]
    assert fair_shares([100, 200], 4000) == [100, 200]
    assert sum(fair_shares([7, 9000, 9000, 1], 1000)) <= 1000


def test_step_lists_are_compressed_to_ranges() -> None:
    assert step_ranges([6, 7, 8, 10, 12, 13]) == "6–8, 10, 12–13"


SCENARIO_TRACES = sorted([*SCENARIOS.glob("*/bad/trace.json.gz"), *SCENARIOS.glob("*/bad/nsys.sqlite.gz")])


def finding_articles(page: str) -> dict[str, str]:
    """rule -> the HTML of its finding card."""
    parts = re.split(r'(?=<article class="card finding")', page)
    return {re.search(r'data-rule="([^"]+)"', p).group(1): p for p in parts[1:]}


@pytest.mark.parametrize("trace", SCENARIO_TRACES, ids=lambda p: f"{p.parts[-3]}-{p.name.split('.')[0]}")
def test_h100_scenario_report_points_findings_into_the_timeline(trace: Path, unpacked,
                                                                tmp_path: Path) -> None:
    analysis = analyze(unpacked(trace))
    out = tmp_path / "r.html"
    write_html(analysis, out)
    assert out.stat().st_size < 1_500_000
    cards = finding_articles(out.read_text(encoding="utf-8"))
    assert list(cards) == [f.rule for f in analysis.results.findings]
    for f in analysis.results.findings:
        if f.evidence.kernels:  # kernels run every step: the drawn one has them too
            assert 'class="show-in-tl"' in cards[f.rule], f.rule
