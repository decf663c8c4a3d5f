"""Fuzzing the output policy itself (`advisor.safe_text`), for any input (hypothesis).

Inputs are any Unicode text, lone surrogates included, mixed with the pieces attacks are made of
(``::``, ``##[``, ``##vso[``, section markers, line breaks, ESC/OSC, bidi controls, mentions,
URLs). Whatever the input: a `plain` name holds no control, bidi or separator character and no
CI form that acts anywhere in a line; names joined into a line and wrapped at any width by rich
(as the console does) or by textwrap, then guarded, give no line that starts a workflow command;
a guarded stream written in arbitrary pieces holds the same; Markdown keeps no live mention or
URL; a workflow command's message cannot end the command.

Reproducible in CI: fixed seeds, no example database (as tests/hostile/test_fuzz.py).
"""

from __future__ import annotations

import io
import json
import os
import re
import textwrap
import unicodedata

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from advisor.gate.render.github import command
from advisor.safe_text import (
    CommandFreeStream,
    json_text,
    markdown,
    no_ci_commands,
    plain,
    workflow_data,
    workflow_property,
)
from tests.hostile.test_output_policy import violations

EXAMPLES = int(os.environ.get("ADVISOR_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck), print_blob=True)

PIECES = ("::", ":", "::error file=a,line=1::x", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b",
          "\x0c", "\x85", "\u2028", "\u00a0", "\u3000", "#", "##", "##[", "##[add-mask]",
          "##vso[", "##VsO[task.complete]", "section_start:", "SECTION_END:", "section_", "\x1b",
          "\x1b[31m", "\x1b]8;;http://e\x07", "\x00", "\x7f", "\x9b", "\u202e", "\u2066",
          "\u200b", "\ufeff", "\ud800", "\udfff", "@", "@alice", "http://", "https://e.x/y",
          "www.", "mailto:", "`", "|", "\\", "[/]", "<", "&", "%", "%0A", ",")
TEXT = st.lists(st.sampled_from(PIECES) | st.characters(categories=["Cs"])
                | st.text(max_size=8), max_size=40).map("".join)
_ANYWHERE = re.compile(r"##\[|##vso\[|section_(?:start|end):", re.IGNORECASE)
_UNSAFE = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _starts_command(line: str) -> bool:
    """A line a runner would parse as ``::cmd``: blanks and terminal escapes, then ``::``."""
    return re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", line).lstrip().startswith("::")


@seed(30)
@FUZZ
@given(TEXT)
def test_a_plain_name_is_one_safe_line(text):
    s = plain(text)
    bad = [c for c in s if unicodedata.category(c) in _UNSAFE]
    assert not bad, (text, s)
    assert not _ANYWHERE.search(s), (text, s)


@seed(31)
@FUZZ
@given(st.lists(TEXT, min_size=1, max_size=5), st.integers(min_value=10, max_value=120),
       st.text(alphabet=" :ab", max_size=6))
def test_names_wrapped_by_rich_at_any_width_start_no_command(names, width, lead):
    """A console line: advisor's own text, then names, wrapped by rich (words, or long words
    folded at the width), written through the guarded stream."""
    out = io.StringIO()
    console = Console(file=CommandFreeStream(out), width=width, highlight=False)
    console.print(Text(lead + " ".join(plain(n) for n in names)))
    console.print(f"x: {' '.join(plain(n) for n in names)}", markup=False)
    assert not violations(out.getvalue()), (names, width, out.getvalue())


@seed(32)
@FUZZ
@given(st.lists(TEXT, min_size=1, max_size=5), st.integers(min_value=5, max_value=120))
def test_names_wrapped_by_textwrap_then_guarded(names, width):
    line = " ".join(plain(n) for n in names)
    wrapped = "\n".join(textwrap.wrap(line, width, break_on_hyphens=False))
    assert not violations(no_ci_commands(wrapped)), (names, width)


@seed(33)
@FUZZ
@given(TEXT)
def test_any_text_guarded_has_no_command_line(text):
    """`no_ci_commands` alone, on raw text (controls and all): no line, at any line break a
    viewer knows, starts a command, and no anywhere form is left."""
    out = no_ci_commands(text)
    assert not _ANYWHERE.search(out), (text, out)
    assert not any(_starts_command(line) for line in re.split(r"\r\n|[\r\n]", out)), (text, out)
    assert not any(_starts_command(line) for line in out.splitlines()), (text, out)


@seed(34)
@FUZZ
@given(TEXT, st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_a_guarded_stream_written_in_pieces(text, cuts):
    """The same text written in arbitrary pieces (rich writes once per print; a ``::`` split
    between two writes is still a line start)."""
    text = plain(text).replace("?", "\n")  # names' own breaks are gone; give the text lines
    out = io.StringIO()
    stream = CommandFreeStream(out)
    points = sorted({min(c, len(text)) for c in cuts})
    for a, b in zip([0, *points], [*points, len(text)], strict=True):
        stream.write(text[a:b])
    assert not any(_starts_command(line) for line in out.getvalue().split("\n")), (text, cuts)


def _live_markdown(md: str) -> list[str]:
    """Mentions and URLs outside code spans (escape pairs read first, as CommonMark does)."""
    text = "".join(m.group(0) for m in re.finditer(r"\\.|`[^`]*`|[^\\`]+|[\\`]", md, re.DOTALL)
                   if not (len(m.group(0)) > 1 and m.group(0)[0] == m.group(0)[-1] == "`"))
    return re.findall(r"@[A-Za-z0-9]|[A-Za-z][A-Za-z0-9+.-]*://|www\.|mailto:", text, re.IGNORECASE)


@seed(35)
@FUZZ
@given(TEXT)
def test_markdown_keeps_no_live_mention_url_or_html(text):
    md = markdown(text)
    assert not _live_markdown(md), (text, md)
    assert not violations(f"- {md}"), (text, md)  # a list item; a table cell starts with |
    outside = re.sub(r"`[^`]*`", "", md)
    assert "<" not in outside and "\n" not in md, (text, md)


@seed(36)
@FUZZ
@given(TEXT, TEXT)
def test_a_workflow_command_stays_one_command(title, message):
    line = command("error", title, message)
    assert "\n" not in line and "\r" not in line
    assert line.startswith("::error title=") and not _ANYWHERE.search(line)
    assert "::" not in workflow_property(title) and "," not in workflow_property(title)
    assert "%" not in workflow_data(message).replace("%25", "").replace("%0D", "").replace("%0A", "")


@seed(37)
@FUZZ
@given(st.dictionaries(TEXT, TEXT | st.lists(TEXT, max_size=3), max_size=4))
def test_json_text_reads_back_the_same_and_holds_no_ci_form(data):
    for indent in (None, 2):
        plain_json = json.dumps(data, indent=indent)
        text = json_text(plain_json)
        assert json.loads(text) == json.loads(plain_json)  # (JSON pairs lone surrogates itself)
        assert not violations(text), (data, text)
