"""Which files make up a job, and which rank each one is.

``advisor analyze`` takes a folder, a glob or several files, one trace per rank (or one file that
holds several ranks, as ``nsys profile`` of a ``torchrun`` writes it). A rank comes from the trace's
own metadata (Kineto's ``distributedInfo``), else from the file name (``rank3``, ``worker_3``),
else from the order the files were given (a file holding several processes numbers them by GPU),
and the report says which.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

from advisor.engine.rank_summary import RankSummary, rank_from_name
from advisor.errors import InputError
from advisor.ingest.folder import Skipped, has_trace_suffix, skipped_note, split_traces
from advisor.ingest.input_file import check_regular


def expand_inputs(paths: Sequence[str | Path]) -> tuple[list[Path], list[Skipped]]:
    """Files named, folders' trace files (sorted, not recursive), glob patterns' matches; and
    the files of folders and globs that are not traces (advisor's own side files, other JSON),
    skipped. A file named on its own is always read: if it is no trace, its reader says so."""
    out: list[Path] = []
    skipped: list[Skipped] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            named = sorted(f for f in p.iterdir() if has_trace_suffix(f))
            for f in named:
                # a rank's trace that is a FIFO, a device, a dangling link or a folder is an
                # error, as when it is named alone: dropped, the job (and a job gate) would read
                # one rank fewer without a word
                check_regular(f)
            candidates = named
            found, left = split_traces(candidates)
            skipped += left
            if not found:
                what = f" ({skipped_note(left)})" if left else ""
                raise InputError(f"{p}: a folder with no trace files (*.json, *.json.gz, *.json.xz, *.sqlite)"
                                 f"{what}")
            out.extend(found)
        elif p.exists():
            out.append(p)
        elif any(ch in str(raw) for ch in "*?["):
            matches = sorted(Path(f) for f in glob.glob(str(raw)))
            for f in matches:
                if has_trace_suffix(f):
                    check_regular(f)  # as in a folder: a rank's trace is never dropped silently
            candidates = [f for f in matches if f.is_file()]
            if not candidates:
                raise InputError(f"{raw}: the pattern matches no file")
            found, left = split_traces(candidates)
            skipped += left
            if not found:
                raise InputError(f"{raw}: the pattern matches no trace ({skipped_note(left)})")
            out.extend(found)
        else:
            raise InputError(f"{p}: no such file")
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique, skipped


def expand(paths: Sequence[str | Path]) -> list[Path]:
    """The trace files `expand_inputs` finds."""
    return expand_inputs(paths)[0]


def assign_ranks(summaries: list[RankSummary]) -> list[RankSummary]:
    """Give every summary a rank and say where it came from; two claims on one rank is an error."""
    for s in summaries:
        if s.ranks_in_file == 1 and s.metadata_rank is not None:
            s.rank, s.rank_source = s.metadata_rank, "trace metadata"
        elif s.ranks_in_file == 1 and rank_from_name(s.path) is not None:
            s.rank, s.rank_source = rank_from_name(s.path), "file name"  # type: ignore[assignment]
    taken = {s.rank for s in summaries if s.rank_source}
    # The rest by the order given (within one file by GPU index), after the ranks already known.
    rest = sorted((s for s in summaries if not s.rank_source),
                  key=lambda s: (s.order, s.device if s.device is not None else -1, s.pid))
    nxt = 0
    for s in rest:
        while nxt in taken:
            nxt += 1
        s.rank = nxt
        s.rank_source = "GPU order in the file" if s.ranks_in_file > 1 else "order given"
        taken.add(nxt)
    by_rank: dict[int, RankSummary] = {}
    for s in summaries:
        if s.rank in by_rank:
            other = by_rank[s.rank]
            raise InputError(f"two traces claim rank {s.rank} ({s.rank_source}): {other.path} and "
                             f"{s.path}")
        by_rank[s.rank] = s
    return sorted(summaries, key=lambda s: s.rank)
