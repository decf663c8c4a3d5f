"""One output policy for every string from a trace or a file name, on every stream (issue 30).

Hostile strings are planted in every field that reaches output, in copies of real H100 captures
(a Kineto trace rewritten as JSON, an nsys export changed with sqlite3) and in saved results the
gate reads; then every human-facing stream is read line by line: `analyze`'s console (with and
without steps), its HTML page, the gate's text, annotations, Markdown and JUnit, and the error
line. No line may hold a control, bidi or separator character (Unicode Cc, Cf, Cs, Zl, Zp; tab
allowed), start with ``::`` after its blanks (the gate's own annotations excepted), or hold
``##[``, ``##vso[`` or a GitLab section marker anywhere; Markdown may not keep a mention or a
bare URL outside a code span. The JSON result keeps the strings raw (it is data for programs).

The planted names carry a run of ``pad ::error file=a,line=1::wrapN`` pieces with growing pads,
so rich's wrapping at 80 columns puts some ``::error`` first on a line: the tests show it did
(the neutralised ``: :error`` is there) and that without the line guard the check fails.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shutil
import sqlite3
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.hostile.conftest import FIXTURES, assert_held, run_cli, snapshot

KINETO = FIXTURES / "host-sync" / "bad" / "trace.json.gz"
NSYS = FIXTURES / "host-sync" / "bad" / "nsys.sqlite.gz"

WRAP = " ".join(f"{'p' * n} ::error file=a,line=1::wrap{n}" for n in range(1, 20))
ATTACKS = (
    "\n::set-output name=x::y\r::add-mask::z\r\n  ::warning::w ##[stop-commands]a "
    "##[set-output name=b;]c ##[add-mask]d ##vso[task.setvariable variable=e]f ##VSO[task.complete]g "
    "###[error]h section_start:1:evil\r\x1b[0Ksection_end:1:evil "
    "\x1b]8;;http://evil\x07link\x1b]8;;\x07\x1b[2J\x1bc\x00nul\x85\x9b31m\x7f "
    "\u202erlo\u2066iso\u2069\u200e\u200b\ufeff\u2028ls @alice @org/team https://evil.example/x "
    "www.evil.example mailto:x@evil.example [/][link=http://x]m[/link] <img src=x onerror=alert(1)>"
)


def hostile(tag: str) -> str:
    """A name for one field: its tag (to find it in the output), the attacks, the wrap run."""
    return f"{tag} {ATTACKS} {WRAP}"


FILE_NAME = "::error file=a,line=1::x\n::warning::nl ##vso[task.complete]\x1b[2J\u202e @bob www.f.example"
# The gate takes a path with a glob character (``[``, ``*``, ``?``) for a job of rank traces.
GATE_FILE_NAME = ("::error file=a,line=1::x\n::warning::nl\r::add-mask::m section_start:1:s\x1b\u202e "
                  "@bob www.f.example")

_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_ANYWHERE = re.compile(r"##\[|##vso\[|section_(?:start|end):", re.IGNORECASE)
_OURS = re.compile(r"::(error|notice) title=advisor gate")


def violations(text: str, annotations: bool = False) -> list[str]:
    """Every line of ``text`` that breaks the policy, with why (empty: the stream holds)."""
    found = []
    for line in text.split("\n"):
        bad = [c for c in line if c != "\t" and unicodedata.category(c) in _UNSAFE_CATEGORIES]
        if bad:
            found.append(f"{bad[0]!r} in {line[:120]!r}")
        head = line.lstrip()
        if head.startswith("::") and not (annotations and _OURS.match(head)):
            found.append(f"line starts a workflow command: {line[:120]!r}")
        if _ANYWHERE.search(line):
            found.append(f"CI command form in {line[:120]!r}")
    return found


def live_markdown(text: str) -> list[str]:
    """Mentions and URLs GitHub would ping or link: those outside code spans."""
    outside = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"(?<![\w`])@[A-Za-z0-9][\w/-]*|https?://\S+|www\.\S+|mailto:\S+", outside,
                      re.IGNORECASE)


def assert_safe(text: str, stream: str, annotations: bool = False) -> None:
    bad = violations(text, annotations)
    assert not bad, f"{stream}: {bad[:5]}"


# ----- hostile copies of real traces ---------------------------------------------------------


def kineto_copy(path: Path) -> Path:
    """The host-sync capture with a hostile kernel, operator, step, phase-range, process and
    GPU name (the step ranges keep their number, so ``--steps`` still finds them)."""
    with gzip.open(KINETO, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        name, cat = e.get("name", ""), e.get("cat")
        if cat == "kernel":
            e["name"] = f"{name} {hostile('KERNELTAG')}"
        elif cat == "cpu_op" and name.startswith("aten::"):
            e["name"] = f"{name} {hostile('OPTAG')}"
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            e["name"] = f"{name} {hostile('STEPTAG')}"
        elif cat == "user_annotation" and name.startswith("Optimizer.step#"):
            e["name"] = f"Optimizer.step#{hostile('PHASETAG')}"
        elif e.get("ph") == "M" and name == "process_name":
            e["args"]["name"] = hostile("PROCTAG")
    for prop in doc.get("deviceProperties", []):
        prop["name"] = hostile("GPUTAG")
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return path


def nsys_copy(path: Path) -> Path:
    """The host-sync nsys export with hostile kernel, NVTX (step and phase), process and GPU
    names. SQLite cannot store a lone surrogate from Python: the Kineto copy carries those."""
    with gzip.open(NSYS, "rb") as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    attacks = ATTACKS.replace("\x00", "?")  # sqlite3 text ends at NUL for some readers
    with sqlite3.connect(path) as c:
        c.execute("UPDATE StringIds SET value = value || ? WHERE id IN (SELECT shortName FROM "
                  "CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT demangledName FROM "
                  "CUPTI_ACTIVITY_KIND_KERNEL)", (f" KERNELTAG {attacks} {WRAP}",))
        c.execute("UPDATE NVTX_EVENTS SET text = text || ? WHERE text LIKE 'step %'",
                  (f" STEPTAG {attacks} {WRAP}",))
        c.execute("UPDATE NVTX_EVENTS SET text = 'optimizer.step#' || ? WHERE text = 'optimizer'",
                  (f"PHASETAG {attacks}",))
        c.execute("UPDATE PROCESSES SET name = ?", (f"PROCTAG {attacks} {WRAP}",))
        c.execute("UPDATE TARGET_INFO_GPU SET name = ?", (f"GPUTAG {attacks} {WRAP}",))
    return path


def analyze(trace: Path, *extra: object) -> tuple[str, str]:
    run = run_cli(["analyze", trace, *extra])
    assert_held(run, ok=(0,))
    return run.stdout, run.stderr


def check_console(out: str, err: str, tags: tuple[str, ...]) -> None:
    assert_safe(out, "console")
    assert_safe(err, "stderr")
    for tag in tags:  # the names are shown, as data
        assert tag in out, f"{tag} not shown"
    assert "# #[stop-commands]" in out and "# #vso[task.complete]" in out.lower()
    # wrapping at 80 columns put a planted ``::error`` first on a line: broken there
    assert re.search(r"^\s*: :error file=a,line=1::wrap\d+", out, re.MULTILINE), out[-3000:]


# ----- analyze ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kineto(tmp_path_factory) -> Path:
    return kineto_copy(tmp_path_factory.mktemp("kineto") / "hostile.json.gz")


@pytest.fixture(scope="module")
def nsys(tmp_path_factory) -> Path:
    return nsys_copy(tmp_path_factory.mktemp("nsys") / "hostile.sqlite")


def test_kineto_names_on_the_console(kineto):
    out, err = analyze(kineto, "--steps", r"^ProfilerStep#\d+", "--show-fixes")
    check_console(out, err, ("STEPTAG", "PROCTAG", "GPUTAG", "OPTAG", "PHASETAG"))
    analysed = out[out.index("Analysed: "):]
    assert analysed.startswith("Analysed: process ") and "PROCTAG" in analysed[:200]


def test_nsys_names_on_the_console(nsys):
    out, err = analyze(nsys, "--steps", r"^step \d+")
    check_console(out, err, ("STEPTAG", "PROCTAG", "GPUTAG", "PHASETAG"))


def test_kernel_names_in_the_whole_trace_summary(kineto, tmp_path):
    """GPU work only (no host ranges, so no steps): the console lists the top kernels."""
    with gzip.open(kineto, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M"
                          or e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    trace = tmp_path / "gpu-only.json"
    trace.write_text(json.dumps(doc))
    out, err = analyze(trace)
    assert "Top kernels (whole trace)" in out
    assert_safe(out, "console")
    assert_safe(err, "stderr")
    assert "KERNELTAG" in out


def test_the_json_result_keeps_the_raw_strings(kineto, tmp_path):
    """JSON is data: the strings read back as the trace has them; the text on stdout (a CI
    step's log) still holds no CI form, its ``#`` and ``_`` written as JSON escapes."""
    out = tmp_path / "r.json"
    analyze(kineto, "-q", "--json", out, "--steps", r"^ProfilerStep#\d+")
    data = json.loads(out.read_text())
    assert {g["name"] for g in data["trace"]["gpus"]} == {hostile("GPUTAG")}
    stdout, _ = analyze(kineto, "-q", "--json", "-", "--steps", r"^ProfilerStep#\d+")
    assert json.loads(stdout)["trace"]["gpus"] == data["trace"]["gpus"]
    assert_safe(stdout, "--json -")


@pytest.mark.parametrize("which", ["kineto", "nsys"])
def test_the_html_page_shows_no_control_or_markup_from_names(which, kineto, nsys, tmp_path):
    page = tmp_path / "r.html"
    trace, steps = (kineto, r"^ProfilerStep#\d+") if which == "kineto" else (nsys, r"^step \d+")
    analyze(trace, "-q", "--html", page, "--steps", steps)
    html = page.read_text(encoding="utf-8")
    bad = {unicodedata.name(c, hex(ord(c))) for c in html
           if c not in "\n\t\r" and unicodedata.category(c) in _UNSAFE_CATEGORIES}
    assert not bad, bad
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    tags = ("KERNELTAG", "STEPTAG", "PROCTAG", "GPUTAG") + (("OPTAG",) if which == "kineto" else ())
    assert all(tag in html for tag in tags)


def test_a_file_name_never_starts_the_first_line(kineto, tmp_path, monkeypatch):
    """``advisor analyze '::error file=a,line=1::x....json.gz'`` from the trace's folder: the
    first line of the console is the path, shown as data."""
    trace = tmp_path / (FILE_NAME + ".json.gz")
    shutil.copyfile(kineto, trace)
    monkeypatch.chdir(tmp_path)
    before = snapshot([trace])
    run = run_cli(["analyze", trace.name, "--steps", r"^ProfilerStep#\d+"])
    assert_held(run, before, ok=(0,))
    assert_safe(run.stdout, "console")
    assert run.stdout.startswith(": :error file=a,line=1::x?::warning::nl # #vso[task.complete]?[2J?")


def test_a_missing_hostile_file_is_one_safe_error_line(tmp_path):
    run = run_cli(["analyze", tmp_path / (FILE_NAME + ".json")])
    assert_held(run)
    assert run.exit_code == 2
    assert_safe(run.stderr, "error line")


def test_a_usage_error_quoting_a_hostile_value_is_safe():
    """click's usage errors quote what was typed (a file name, an option value)."""
    run = run_cli(["analyze", "t.json", "--max-steps", hostile("ARGTAG")])
    assert run.exit_code == 2 and "ARGTAG" in run.stderr and "Traceback" not in run.stderr
    assert_safe(run.stderr, "usage error")


def test_progress_lines_name_the_file_safely(kineto, tmp_path):
    """The progress display (a terminal's stderr) names the trace file and what it found."""
    import io

    from advisor.commands.analyze import run_analysis, settings_from_cli
    from advisor.ingest.base import LoadOptions
    from advisor.report.progress import Progress

    trace = tmp_path / (FILE_NAME + ".json.gz")
    shutil.copyfile(kineto, trace)
    shown = io.StringIO()
    progress = Progress(True, shown)
    run_analysis(trace, LoadOptions(step_pattern=r"^ProfilerStep#\d+"),
                 settings_from_cli((), (), (), True), progress)
    progress.note(hostile("NOTETAG"))
    assert "✓ read ::error file=a,line=1::x?::warning" in shown.getvalue() and "NOTETAG" in shown.getvalue()
    assert_safe(shown.getvalue(), "progress")


def test_without_the_line_guard_wrapping_starts_a_line_with_a_command(kineto, monkeypatch):
    """The check above has teeth: with the console's line guard taken out (names still
    `plain`), rich's wrapping at 80 columns alone puts ``::error`` first on a line."""
    import advisor.report.emit as emit

    monkeypatch.setattr(emit, "CommandFreeStream", lambda stream: stream)
    run = run_cli(["analyze", kineto, "--steps", r"^ProfilerStep#\d+"])
    assert run.exit_code == 0
    assert any("line starts a workflow command" in v for v in violations(run.stdout))


# ----- the gate, from saved results ---------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("saved") / "bad.json"
    assert run_cli(["analyze", "-q", "--json", out, NSYS]).exit_code == 0
    return json.loads(out.read_text())


def plant(data: dict, slower: float) -> dict:
    """A hostile copy of a saved result: every string the gate reads and shows."""
    d = copy.deepcopy(data)
    trace, steps, kernels = d["trace"], d["steps"], d["kernels"]
    trace["notes"] = [*trace.get("notes", []), hostile("NOTETAG")]
    for g in trace.get("gpus") or []:
        g["name"] = hostile("GPUTAG")
    for k in kernels["all"]:
        k["name"] += hostile("KERNELTAG")
        k["ms_per_step"] *= slower
    for key in ("phases", "idle_causes_ms", "counts_per_step"):
        steps[key] = {hostile(f"{key.upper()}TAG") + k: v * slower for k, v in steps[key].items()}
    kernels["by_category_ms"] = {hostile("CATTAG") + k: v * slower
                                 for k, v in kernels["by_category_ms"].items()}
    (steps.get("detection") or {})["description"] = hostile("STEPSTAG")
    for f in d.get("findings") or []:
        f["message"] = hostile("FINDINGTAG")
    for key in ("steady_times_ms", "gpu_busy_times_ms"):
        steps[key] = [t * slower for t in steps[key]]
    steps["median_ms"] *= slower  # a result that agrees with itself
    return d


def gate_outputs(tmp_path: Path, base: Path, cand: Path, ok: tuple[int, ...]) -> dict[str, str]:
    md, junit, verdict = tmp_path / "gate.md", tmp_path / "gate.xml", tmp_path / "gate.json"
    run = run_cli(["gate", base, cand, "--github-annotations", "--markdown", md, "--junit", junit,
                   "--json", verdict])
    assert_held(run, ok=ok)
    xml = ET.fromstring(junit.read_bytes())
    junit_text = "\n".join([*(e.text or "" for e in xml.iter()),
                            *(v for e in xml.iter() for v in e.attrib.values())])
    return {"stdout": run.stdout, "stderr": run.stderr, "markdown": md.read_text(),
            "junit": junit_text}


def check_gate(streams: dict[str, str]) -> None:
    for name, text in streams.items():
        assert_safe(text, name, annotations=name == "stdout")
    assert not live_markdown(streams["markdown"]), live_markdown(streams["markdown"])[:5]


def test_gate_text_markdown_junit_and_annotations(saved, tmp_path):
    base = tmp_path / (GATE_FILE_NAME.replace("\n", "\r") + ".base.json")
    cand = tmp_path / (GATE_FILE_NAME + ".cand.json")
    base.write_text(json.dumps(plant(saved, 1.0)))
    cand.write_text(json.dumps(plant(saved, 1.5)))
    streams = gate_outputs(tmp_path, base, cand, ok=(1,))
    check_gate(streams)
    text = streams["stdout"]
    assert "KERNELTAG" in text and "::error title=advisor gate" in text  # shown, and ours kept
    assert "`@alice`" in streams["markdown"] and "`https://evil.example/x`" in streams["markdown"]


def test_gate_error_outputs_with_a_hostile_file_name(saved, tmp_path):
    """The runs cannot be read: the error verdict on every stream still holds the policy."""
    base = tmp_path / (GATE_FILE_NAME + ".json")
    base.write_text("{not json")
    cand = tmp_path / "cand.json"
    cand.write_text(json.dumps(saved))
    check_gate(gate_outputs(tmp_path, base, cand, ok=(2,)))
