"""The verdict as GitHub-flavoured markdown, for a PR comment or ``$GITHUB_STEP_SUMMARY``.

Kernel names carry ``<>``, ``|``, ``*`` and ``_``, and a name can carry ``@someone`` or a URL: every
name goes through `cell` (`advisor.safe_text.markdown`), which escapes HTML and markdown
punctuation and puts mentions and URLs in code spans, so a template argument can neither inject
markup, break a table, ping a person nor add a link to a PR comment.
"""

from __future__ import annotations

from pathlib import PurePath

from advisor.gate.attribution import Change
from advisor.gate.compare import GateResult
from advisor.safe_text import markdown, no_ci_commands

ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️"}
TITLE = {"pass": "pass", "fail": "regression", "inconclusive": "could not compare"}


def cell(text: str) -> str:
    """Text safe in a table cell or list item (the output policy's markdown form)."""
    return markdown(text)


def _rows(title: str, changes: tuple[Change, ...], unit: str = "ms") -> list[str]:
    if not changes:
        return []
    out = [f"| {title} | baseline | candidate | change |", "|---|---:|---:|---:|"]
    for c in changes:
        rel = f" ({c.relative:+.0%})" if c.relative is not None else ""
        if unit == "ms":
            out.append(f"| {cell(c.name)} | {c.base:.3f} ms | {c.cand:.3f} ms | "
                       f"{c.delta:+.3f} ms{rel} |")
        else:
            out.append(f"| {cell(c.name)} | {c.base:g} | {c.cand:g} | {c.delta:+g}{rel} |")
    return [*out, ""]


def run_names(base: str, cand: str) -> tuple[str, str]:
    """Names that tell the two runs apart: the file names, or as many trailing path parts as it
    takes when they share one (``a/nsys.sqlite.gz`` and ``b/nsys.sqlite.gz``)."""
    pb, pc = PurePath(base).parts, PurePath(cand).parts
    for n in range(1, max(len(pb), len(pc)) + 1):
        nb, nc = "/".join(pb[-n:]), "/".join(pc[-n:])
        if nb != nc:
            return nb, nc
    return f"{base} (baseline)", f"{cand} (candidate)"  # the same file twice


def _count(x) -> str:
    """The run's steady steps judged ("30 of 69" when a window of them was)."""
    return x.steps_judged.removesuffix(" steady steps")


def render_markdown(result: GateResult) -> str:
    t, b, c = result.timing, result.baseline, result.candidate
    b_name, c_name = run_names(b.path, c.path)
    out = [f"## {ICON[result.status]} advisor gate: {TITLE[result.status]}", "",
           "| run | file | capture | steady steps | step | median step as traced |",
           "|---|---|---|---:|---:|---:|",
           f"| baseline | {cell(b_name)} | {cell(b.trace_format)} | {_count(b)} | "
           f"{b.step_ms:.3f} ms | {b.median_ms:.3f} ms |",
           f"| candidate | {cell(c_name)} | {cell(c.trace_format)} | {_count(c)} | "
           f"{c.step_ms:.3f} ms | {c.median_ms:.3f} ms |", "",
           f"**Step time:** {t.change:+.1%} (Hodges-Lehmann shift {t.shift_ms:+.3f} ms, "
           f"Mann-Whitney p={t.p_value:.2g} over {t.n_base} and {t.n_cand} {t.source}, "
           f"threshold {result.policy.threshold:.0%}): "
           f"**{t.verdict}**", ""]
    noise = [n for n in result.notes if n.startswith("host timing noise")]
    if noise:
        out += [f"**Host timing noise, not a regression:** {cell(noise[0].split(', but ', 1)[-1])}",
                ""]
    if result.failures:
        out += ["### Regressions", ""]
        out += [f"- {cell(r.summary)}" for r in result.failures]
        out.append("")
    allowed = [r for r in result.regressions if r.allowed]
    if allowed:
        out += ["### Allowed", ""] + [f"- {cell(r.summary)}" for r in allowed] + [""]
    if result.inconclusive:
        out += ["### Could not decide", ""] + [f"- {cell(x)}" for x in result.inconclusive] + [""]
    for role, x in (("candidate", c), ("baseline", b)):
        if x.tried is not None and x.tried.fixes:
            out += [f"### Measured on the {role}'s job (advisor profile --try)", ""]
            out += [f"- {'**' if f.improvement else ''}{cell(f.describe())}"
                    f"{'**' if f.improvement else ''}" for f in x.tried.fixes]
            out.append("")
    if result.findings:
        out += ["### Rule findings", "", "| rule | status | baseline cost | candidate cost |",
                "|---|---|---:|---:|"]
        out += [f"| {cell(f.rule)} ({cell(f.code)}) | {f.status} | {f.base_saved_ms:.3f} ms | "
                f"{f.cand_saved_ms:.3f} ms |" for f in result.findings]
        out.append("")
    a = result.attribution
    gpu = tuple(x for x in (a.gpu_busy_ms, a.gpu_idle_ms) if x is not None)
    details = [*_rows("GPU", gpu), *_rows("kernel category", a.categories_ms),
               *_rows("kernel", a.kernels_ms), *_rows("count per step", a.counts, ""),
               *_rows("phase", a.phases_ms), *_rows("GPU idle while host in", a.idle_causes_ms)]
    if details:
        out += ["<details><summary>Where the time moved (per step)</summary>", "", *details,
                "</details>", ""]
    if result.notes:
        out += ["<details><summary>Notes</summary>", ""]
        out += [f"- {cell(n)}" for n in result.notes] + ["", "</details>", ""]
    return no_ci_commands("\n".join(out))  # printed to a CI log too, by some workflows


def render_error_markdown(message: str) -> str:
    """What CI shows when the gate could not run at all (exit 2)."""
    return no_ci_commands(f"## {ICON['inconclusive']} advisor gate: could not compare\n\n"
                          f"{cell(message)}\n\nThe gate fails closed: fix the inputs and run it "
                          "again.\n")
