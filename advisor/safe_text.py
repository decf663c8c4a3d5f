"""The one escaping policy: every string that came from a trace is data, on every output.

Kernel, range, GPU and file names are written by whoever made the trace. Printed raw they could
drive the terminal (ESC/OSC sequences: colours, hidden hyperlinks, clear screen), be parsed as
rich markup (``[/]`` crashes it, ``[link=...]`` hides a link), or start a line of CI output with
``::`` (a GitHub Actions workflow command, which the runner executes). Each output format has
one function here, and renderers call it on every trace-derived string:

* `plain` - one line of plain text (stdout/stderr logs): C0/C1 control characters and Unicode
  line/bidi controls replaced, so a name can neither break the line nor move the cursor.
* `markup` - `plain`, then rich markup escaped, for strings interpolated into rich markup.
* `workflow_data` / `workflow_property` - GitHub's documented escaping for workflow commands
  (``%``, CR, LF; plus ``:`` and ``,`` in properties).
* `no_workflow_commands` - the last guard on text printed to a CI log: a line that would start
  with ``::`` (the runner trims leading whitespace before looking) gets a visible ``> `` prefix.

HTML is escaped by jinja2's autoescape and JSON by `json.dumps`; neither needs more.
"""

from __future__ import annotations

import re

from rich.markup import escape as _rich_escape

# C0 and C1 controls, DEL, and the Unicode separators/bidi overrides that reorder or break lines.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_SHOWN = 2000  # characters of one name shown on a console; longer ones are cut with a mark


def plain(text: object, limit: int = MAX_SHOWN) -> str:
    """One safe line: control characters become ``?``, very long names are cut."""
    s = _CONTROL.sub("?", str(text))
    if len(s) > limit:
        s = s[:limit] + f"...[{len(s) - limit} more characters]"
    return s


def markup(text: object, limit: int = MAX_SHOWN) -> str:
    """`plain`, escaped so rich prints it literally inside markup."""
    return _rich_escape(plain(text, limit))


_CONTROL_BUT_NEWLINES = re.compile(
    "[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def workflow_data(text: object) -> str:
    """The message part of ``::command props::message``: control characters other than CR/LF
    replaced, then escaped as GitHub documents (CR and LF survive as %0D/%0A)."""
    s = _CONTROL_BUT_NEWLINES.sub("?", str(text))
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: object) -> str:
    """A property value of a workflow command (``title=...``), escaped as GitHub documents."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def no_workflow_commands(text: str) -> str:
    """Text for a CI log in which no line starts a workflow command (``::``), even after
    the leading whitespace the runner trims. Lines are split at CR too, as a log viewer does."""
    lines = re.split(r"(\r\n|\r|\n)", text)
    return "".join("> " + part if i % 2 == 0 and part.lstrip().startswith("::") else part
                   for i, part in enumerate(lines))
