"""The one output policy: every string that came from a trace or a file name is data, on every
human-facing output.

Kernel, operator, range, phase, process, GPU and file names are written by whoever made the
trace (and strings in a saved JSON result by whoever wrote that file). Printed raw they could
drive the terminal (ESC/OSC sequences: colours, hidden hyperlinks, clear screen), reorder the
line (bidi overrides), be parsed as rich markup (``[/]`` crashes it), or be run by a CI log
parser: GitHub Actions runs ``::cmd`` at the start of a line and its legacy ``##[cmd]`` anywhere
in one, Azure Pipelines ``##vso[...]`` anywhere, GitLab folds the log at ``section_start:`` and
``section_end:``. The policy has two steps:

* `plain` - what one string may contain: Unicode categories Cc, Cf, Cs, Zl and Zp (C0/C1 controls,
  ESC, NUL, DEL, CR/LF, bidi overrides and isolates, zero-width characters, lone surrogates such
  as ``\\ud800``, line/paragraph separators) become ``?``, so a name is one line that cannot move
  the cursor or hide text; the CI forms that act anywhere in a line are broken with one visible
  space (``##[`` -> ``# #[``, ``##vso[`` -> ``# #vso[``, ``section_start:`` ->
  ``section_start :``); a very long name is cut with a mark.
* `no_ci_commands` (whole text) and `CommandFreeStream` (a stream, for rich consoles) - what a
  line may start with: wrapping at 80 columns or joining a name after a line break can put a
  ``::`` first on a line even when no name starts with one, so every rendered output meant for a
  log is checked line by line after wrapping: a line whose first non-blank characters are ``::``
  becomes ``: :`` (the runner trims blanks, then looks for ``::``).

The breaks are a plain ASCII space on purpose: an invisible character (a zero-width space, a
joiner) would itself be a control this policy removes, would make the log lie about what the
name was, and a runner that strips it (or a copy-paste) would make the command live again.

Per format on top of `plain`: `markup` (rich markup escaped), `markdown` (HTML and markdown
punctuation escaped; ``@mentions`` and bare URLs put in code spans, where GitHub neither pings
nor links), `workflow_data`/`workflow_property` (GitHub's documented escaping inside one
workflow command), `visible` (HTML text: the controls of `plain`, newlines kept). JSON keeps the
raw strings: `json.dumps` escapes what JSON needs and JSON is data for programs; `json_text` only
writes the CI forms' ``#`` and ``_`` as JSON escapes, so the JSON on stdout of a CI step holds
none either and reads back as the same strings.
"""

from __future__ import annotations

import html
import re
from typing import TextIO

from rich.markup import escape as _rich_escape

# Unicode categories Cc, Cf, Cs, Zl, Zp (Unicode 14, Python 3.11+): controls, format characters
# (bidi, zero width, BOM), lone surrogates and line/paragraph separators.
_OTHER_UNSAFE = (
    "\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE = re.compile(f"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_NEWLINES = re.compile(f"[\x00-\x09\x0b\x0c\x0e-\x1f{_OTHER_UNSAFE}]")  # CR, LF kept
_UNSAFE_IN_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER_UNSAFE}]")  # tab, LF kept
# CI forms that act anywhere in a line: GitHub's legacy ``##[cmd]``, Azure's ``##vso[``,
# GitLab's section markers. The match gets a space after it (``# #[``, ``section_start :``).
_CI_ANYWHERE = re.compile(r"#(?=#(?:vso)?\[)|section_(?:start|end)(?=:)", re.IGNORECASE)
# Where a log line starts (every break str.splitlines knows, a superset of what runners split
# at), then blanks and terminal escapes (CSI), then ``::``: the space goes between the colons.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_LEAD = rf"(?:[^\S{_BREAKS}]|\x1b\[[0-?]*[ -/]*[@-~])*"
_LINE_START_COMMAND = re.compile(rf"(?:\A|(?<=[{_BREAKS}])){_LEAD}:(?:\x1b\[[0-?]*[ -/]*[@-~])*(?=:)")
_ONLY_LEAD = re.compile(rf"{_LEAD}\Z")
_ESCAPES_ONLY = re.compile(r"(?:\x1b\[[0-?]*[ -/]*[@-~])*\Z")
_LEAD_COLON = re.compile(rf"{_LEAD}:(?:\x1b\[[0-?]*[ -/]*[@-~])*\Z")
MAX_SHOWN = 2000  # characters of one name shown on a console; longer ones are cut with a mark


def _break_anywhere_forms(s: str) -> str:
    return _CI_ANYWHERE.sub(lambda m: m.group(0) + " ", s)


def plain(text: object, limit: int = MAX_SHOWN) -> str:
    """One safe line: controls, bidi and separators become ``?``, CI forms that act anywhere in
    a line are broken, very long names are cut."""
    s = _UNSAFE.sub("?", str(text))
    if len(s) > limit:
        s = s[:limit] + f"...[{len(s) - limit} more characters]"
    return _break_anywhere_forms(s)


def markup(text: object, limit: int = MAX_SHOWN) -> str:
    """`plain`, escaped so rich prints it literally inside markup."""
    return _rich_escape(plain(text, limit))


def visible(text: object) -> str:
    """Multi-line text for a page (HTML): the controls of `plain` replaced, tabs and newlines
    kept (fix snippets are code), CI forms broken."""
    return _break_anywhere_forms(_UNSAFE_IN_TEXT.sub("?", str(text)))


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")
# What GitHub turns into a ping or a link in a comment: @user, @org/team, emails (the part
# from @), URLs with a scheme, www. names. Code spans are neither (GitHub's mention and autolink
# filters skip <code>); a token stops at blanks, backticks (which would end the span) and ``|``
# (which would end a table cell).
_INERT_IN_MARKDOWN = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.|mailto:|xmpp:)[^\s`|]*|@[^\s`|]+", re.IGNORECASE)


def _markdown_text(s: str) -> str:
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(s, quote=False))


def markdown(text: object, limit: int = MAX_SHOWN) -> str:
    """`plain`, for a table cell or list item of GitHub markdown: HTML and markdown punctuation
    escaped (a kernel's ``<>``, ``|``, ``*`` and ``_`` neither inject markup nor break a table),
    and mentions and URLs in code spans, so a name never pings anyone or links anywhere (an
    entity such as ``&#64;`` would not do: GitHub finds mentions after decoding it)."""
    s = plain(text, limit)
    out, pos = [], 0
    for m in _INERT_IN_MARKDOWN.finditer(s):
        out += [_markdown_text(s[pos:m.start()]), f"`{m.group(0)}`"]
        pos = m.end()
    out.append(_markdown_text(s[pos:]))
    return "".join(out)


def workflow_data(text: object) -> str:
    """The message part of ``::command props::message``: controls other than CR/LF replaced,
    CI forms broken, then escaped as GitHub documents (CR and LF survive as %0D/%0A, inside the
    one command). Trace names reach it through `plain` first, so theirs are gone already."""
    s = _break_anywhere_forms(_UNSAFE_BUT_NEWLINES.sub("?", str(text)))
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: object) -> str:
    """A property value of a workflow command (``title=...``), escaped as GitHub documents."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def no_ci_commands(text: str) -> str:
    """Rendered text for a CI log in which no line holds a CI command form: the anywhere forms
    broken, and a line whose first non-blank characters (terminal escapes count as blank) are
    ``::`` gets ``: :``. Lines are split at every line break, CR included, as log viewers do."""
    return _LINE_START_COMMAND.sub(lambda m: m.group(0) + " ", _break_anywhere_forms(text))


no_workflow_commands = no_ci_commands  # the first round's name

_CI_IN_JSON = re.compile(r"#(?=#(?:vso)?\[)|(?<=section)_(?=(?:start|end):)", re.IGNORECASE)


def json_text(text: str) -> str:
    """JSON text (`json.dumps`, ASCII) with no CI form in any line and the same data: the ``#``
    of ``##[``/``##vso[`` and the ``_`` of a section marker become ``\\u0023``/``\\u005f``,
    which every JSON reader reads back as the same characters (in valid JSON they only occur
    inside strings, never after an escaping backslash). Its lines start with blanks, a quote or
    a bracket, never ``::``."""
    return _CI_IN_JSON.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class CommandFreeStream:
    """A text stream that writes through to ``stream`` with `no_ci_commands` applied, for a rich
    console: rich wraps at the console width, so only its output, line by line, shows where
    lines start. Each write is guarded; whether the last line so far is still blank (or blank
    and one ``:``) carries over to the next write, so a ``::`` split between writes is caught
    too. Everything else (``isatty``, ``fileno``, ``encoding``) is the wrapped stream's, so rich
    detects the terminal as before."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._at_start = True  # the current line holds only blanks so far
        self._after_colon = False  # ... blanks and one ':'

    def write(self, text: str) -> int:
        if self._after_colon and text.startswith(":"):
            out = " " + no_ci_commands("\0" + text)[1:]
        elif self._at_start:
            out = no_ci_commands(text)
        else:  # mid-line: the start of this write is no line start
            out = no_ci_commands("\0" + text)[1:]
        last = out[max(out.rfind(c) for c in _BREAKS) + 1:]  # linear, whatever the text
        if len(last) < len(out) or self._at_start:  # `last` is all of the line so far
            self._at_start = bool(_ONLY_LEAD.match(last))
            self._after_colon = bool(_LEAD_COLON.match(last))
        elif self._after_colon:  # blanks and ':' before this write: still so after escapes only
            self._after_colon = bool(_ESCAPES_ONLY.match(out))
        self._stream.write(out)
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
