"""Which files of a folder (or a glob) of rank traces are traces.

`advisor profile` writes its rank traces into a folder beside its own small JSON files (the
capture status, the analysis, the step clock); a user's folder may hold a config or a results
file as well. Pointing `advisor analyze` at that folder is the natural next step, so a file that
is not a trace is skipped and named once, and only a file that *is* a trace but cannot be read
stops the job (with a one-line error naming it, from the reader).

What decides is the content, not the name: a torch.profiler trace is JSON whose `traceEvents`
key appears near its start (Kineto writes it after a few kilobytes of metadata at most), and an
Nsight Systems export is a SQLite file. Files named explicitly on the command line are never
skipped: a named file that is not a trace is an error, as for a single trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import InputError
from advisor.ingest.compression import MAGIC_BYTES, UNPACK_ERRORS, codec_of
from advisor.ingest.input_file import CappedReader, read_head

TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz", ".sqlite", ".sqlite3", ".db", ".sqlite.gz",
                  ".sqlite.xz")
SNIFF_BYTES = 1 << 20
"""How much of a JSON file (decompressed) is read to find `traceEvents`: Kineto writes its
metadata (schema, device properties, distributed info) first, a few kilobytes in real traces."""

OWN_FILE_KEYS = ("advisor_version", "schema_version")
"""Keys of advisor's own JSON results; its capture side files are recognised by name below."""

OWN_FILE_PREFIXES = ("capture_rank", "analysis_rank", "background_rank", "handoff_rank",
                     "steps_rank", "pystacks_rank")
"""The side files `advisor profile` writes beside its traces (advisor.capture)."""


@dataclass(frozen=True)
class Skipped:
    path: Path
    why: str  # "advisor's own file" or "not a trace"


def has_trace_suffix(path: Path) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


TRACE_KEY = b'"traceEvents"'
_FIRST_READ = 64 << 10


def _json_head(path: Path) -> bytes | None:
    """The file's JSON text (decompressed) up to `TRACE_KEY` when it comes within
    `SNIFF_BYTES`, else up to `SNIFF_BYTES`; None when unreadable. Read in growing pieces and
    no further than the key: a job folder of 1,024 torch.profiler ranks was sniffed a whole
    MiB a file (a gzip member decompressed in the job's first, serial second), where Kineto
    writes the key after a few kilobytes (issue #39)."""
    try:
        if codec_of(read_head(path, MAGIC_BYTES)):
            with CappedReader(path) as f:
                return _head_to_key(f)
        with path.open("rb") as f:
            return _head_to_key(f)
    except (OSError, *UNPACK_ERRORS, InputError):
        return None


def _head_to_key(f) -> bytes:
    """What ``f.read(SNIFF_BYTES)`` gives, or its part up to and including `TRACE_KEY` when the
    key lies inside it (`skip_reason` then reads nothing more of it)."""
    head = b""
    size = _FIRST_READ
    while len(head) < SNIFF_BYTES:
        piece = f.read(min(size, SNIFF_BYTES - len(head)))
        if not piece:
            break
        start = max(0, len(head) - len(TRACE_KEY) + 1)  # a key split between two pieces
        head += piece
        if head.find(TRACE_KEY, start) >= 0:
            break
        size *= 2
    return head


def _is_own(path: Path, head: bytes) -> bool:
    if path.name.startswith(OWN_FILE_PREFIXES):
        return True
    try:
        doc = json.loads(head)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and all(k in doc for k in OWN_FILE_KEYS)


def skip_reason(path: Path) -> str | None:
    """Why a file found in a folder is not a rank trace, or None when it is to be read.

    SQLite-named files are always read (the reader names a bad one). A JSON file is a trace when
    `traceEvents` appears in its head; one that cannot be read at all (corrupt, truncated gzip)
    is read too, so its error names it rather than it being skipped in silence."""
    if not path.name.lower().endswith((".json", ".json.gz", ".json.xz")):
        return None
    head = _json_head(path)
    if head is None or not head.strip() or TRACE_KEY in head:
        return None
    if _is_own(path, head):
        return "advisor's own file"
    return "not a trace"


def split_traces(found: list[Path]) -> tuple[list[Path], list[Skipped]]:
    """The traces among files found in a folder or by a glob, and the files skipped with why."""
    traces: list[Path] = []
    skipped: list[Skipped] = []
    for p in found:
        why = skip_reason(p)
        if why is None:
            traces.append(p)
        else:
            skipped.append(Skipped(p, why))
    return traces, skipped


def skipped_note(skipped: list[Skipped]) -> str | None:
    """One line naming the skipped files, advisor's own first."""
    if not skipped:
        return None
    own = [s.path.name for s in skipped if s.why == "advisor's own file"]
    other = [s.path.name for s in skipped if s.why != "advisor's own file"]
    parts = []
    if own:
        parts.append(f"advisor's own files {', '.join(own)}")
    if other:
        parts.append(f"JSON that is not a trace {', '.join(other)}")
    return f"skipped {len(skipped)} file(s) that are not traces: " + "; ".join(parts)
