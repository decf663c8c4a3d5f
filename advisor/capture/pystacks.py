"""Python stacks of the training thread, sampled by advisor itself while an nsys window records.

torch.profiler's ``with_stack`` gives the torch.profiler path its source lines; Nsight Systems
gives none that advisor can use: on the H100 (nsys 2025.3.1, Python 3.12)
``--python-backtrace=cuda`` with ``--sample=process-tree`` and ``--python-sampling=true`` both
exported native frames only, and ``--pytorch=autograd-nvtx`` cost a launch-bound job +25%
(nanoGPT char 12.2 -> 15.3 ms per iteration). So the nsys child samples its own training thread:
a daemon thread reads ``sys._current_frames()`` for that one thread at a fixed rate (1 kHz) and
keeps each sample as a time stamp (``time.perf_counter_ns``, the session's step clock) and the id
of its stack (a stack is kept once, however often it recurs; frames are code objects, named only
when the file is written). It runs only between `StackSampler.start` and `StackSampler.stop`,
i.e. while the window records; outside the window there is no thread and no cost.

The file (`write`) is read back by `advisor.ingest.pystacks`, which aligns the stamps with the
export's clock through the step ranges and turns the samples into Python-frame ranges.

Why not a library (py-spy, austin): they sample from another process through ptrace or
``process_vm_readv``, which containers often forbid, and would be one more binary to ship; the
in-process reader needs neither and its cost is measured (docs/profile.md).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import threading
import time
from array import array
from pathlib import Path
from types import CodeType
from typing import Any

from advisor.output_paths import replace_file

FILE_NAME = "pystacks_{tag}.json.gz"
"""Beside the export in ``--out``: ``pystacks_rank0.json.gz``."""
FORMAT = "advisor-pystacks"
VERSION = 1
INTERVAL_S = 0.001
"""1 kHz: a launch-bound step (10-50 ms on an H100) gets tens of samples, enough to name the
lines that hold the host, while each sample costs the training thread only the moment the
sampler holds the GIL (measured in docs/profile.md)."""
SWITCH_INTERVAL_S = 0.001
"""The interpreter's switch interval while sampling (default 5 ms, ``sys.setswitchinterval``).
The sampler needs the GIL to read a stack; a training thread that holds it (Python code, and
torch's small CPU-side calls, which hand the GIL back before a waiting thread wakes) lets it go
only when asked and a switch interval has passed. With 5 ms the sampler saw only where the thread
blocked (sleeps, waits) and missed a 0.4 ms forward+backward entirely in every one of 8 steps
(tests/ingest/test_pystacks_nsys.py); with 1 ms it samples Python code at about its rate. Set
only while the window records, and put back at its end."""
MAX_SAMPLES = 600_000
"""Ten minutes at 1 kHz, 7 MB in two arrays: past it the sampler stops (``truncated``)."""
MAX_STACKS = 100_000
"""Distinct stacks kept; a sample with a new stack past this is counted, not kept."""
MAX_DEPTH = 256
"""Frames kept per sample, innermost first (a deeper recursion keeps its innermost frames)."""


class StackSampler:
    """Samples one thread's Python stack at `interval_s` from a daemon thread."""

    def __init__(self, interval_s: float = INTERVAL_S, max_samples: int = MAX_SAMPLES,
                 switch_interval_s: float | None = SWITCH_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.switch_interval_s = switch_interval_s
        self._switch_before: float | None = None
        self.max_samples = max_samples
        self.times = array("q")  # perf_counter_ns of each sample
        self.ids = array("i")  # index into `stacks` of each sample
        self.stacks: list[tuple[tuple[CodeType, int], ...]] = []  # (code, line), outermost first
        self.lost = 0  # samples not kept (MAX_STACKS reached)
        self.truncated = False
        self.target: int | None = None  # threading ident of the sampled thread
        self.native_id: int | None = None
        self.started_ns: int | None = None
        self.stopped_ns: int | None = None
        self.cpu_ns = 0  # CPU time of the sampler thread
        self.error: str | None = None  # why sampling stopped early, if it failed
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, ident: int | None = None) -> None:
        """Sample the thread ``ident`` (default: the calling one) until `stop`."""
        if self._thread is not None:
            return
        self.target = threading.get_ident() if ident is None else ident
        if ident is None:
            self.native_id = threading.get_native_id()
        self._stopping = False
        if self.switch_interval_s:  # see SWITCH_INTERVAL_S; put back by `stop`
            self._switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_before, self.switch_interval_s))
        self.started_ns = time.perf_counter_ns()
        self._thread = threading.Thread(target=self._run, name="advisor-pystacks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; returns once the sampler thread has ended (within one interval)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        thread.join()
        self.stopped_ns = time.perf_counter_ns()
        if self._switch_before is not None:
            sys.setswitchinterval(self._switch_before)
            self._switch_before = None

    def _run(self) -> None:
        cpu0 = time.thread_time_ns()
        try:
            self._sample()
        except Exception as e:  # never a traceback into the job's output
            self.error = f"{type(e).__name__}: {e}"  # what was sampled so far is kept
        finally:  # the sampler's own CPU time: what it took from the job (docs/profile.md)
            self.cpu_ns = time.thread_time_ns() - cpu0

    def _sample(self) -> None:
        frames_of = sys._current_frames
        clock = time.perf_counter_ns
        sleep = time.sleep  # not Event.wait: its timed lock costs ~10x a sleep per sample
        target = self.target
        times, ids, stacks = self.times, self.ids, self.stacks
        index: dict[tuple[int, ...], int] = {}
        step = int(self.interval_s * 1e9)
        due = clock()
        while not self._stopping:
            frame = frames_of().get(target)
            t = clock()
            if frame is None:  # the thread has ended
                return
            entries = stack_frames(frame)
            del frame
            # ids are stable: `stacks` holds the code objects
            key = tuple((id(c), line) for c, line in entries)
            sid = index.get(key)
            if sid is None:
                if len(stacks) >= MAX_STACKS:
                    self.lost += 1
                    sid = -1
                else:
                    sid = index[key] = len(stacks)
                    entries.reverse()
                    stacks.append(tuple(entries))
            if sid >= 0:
                times.append(t)
                ids.append(sid)
                if len(times) >= self.max_samples:
                    self.truncated = True
                    return
            due += step
            now = clock()
            if due < now:  # late (the GIL was held): the next sample one interval from now
                due = now + step
            sleep((due - now) / 1e9)

    def to_json(self) -> dict[str, Any]:
        """The samples as `advisor.ingest.pystacks` reads them; frames named as torch.profiler
        names its ``python_function`` events (`frame_of`)."""
        frames: list[list[Any]] = []
        frame_ids: dict[tuple[int, int], int] = {}
        stacks: list[list[int]] = []
        for entries in self.stacks:
            row = []
            for code, line in entries:
                k = frame_ids.get((id(code), line))
                if k is None:
                    k = frame_ids[(id(code), line)] = len(frames)
                    frames.append(list(frame_of(code, line)))
                row.append(k)
            stacks.append(row)
        return {
            "format": FORMAT, "version": VERSION, "clock": "perf_counter_ns",
            "interval_ns": int(self.interval_s * 1e9),
            "pid": os.getpid(), "tid": self.native_id, "started_ns": self.started_ns,
            "stopped_ns": self.stopped_ns, "cpu_ns": self.cpu_ns, "truncated": self.truncated,
            "lost": self.lost, "error": self.error,
            "frames": frames, "stacks": stacks,
            "t": _deltas(self.times), "stack": list(self.ids),
        }

    def write(self, path: Path) -> None:
        """Gzipped JSON at ``path``, renamed over it when complete (`replace_file`). The stamps
        are the process's ``perf_counter_ns``; the session's step clock is relative to its
        ``run_start_ns`` (in ``capture_rank<R>.json``), which the reader subtracts."""
        text = json.dumps(self.to_json(), separators=(",", ":"))
        replace_file(path, gzip.compress(text.encode(), compresslevel=6, mtime=0))


MODULE_CODE = "<module>"
"""The code object of a file's top level. Its frames are keyed by the line they are running
(`stack_frames`): a script's training loop written at module level is one frame for its whole
run, started at line 1, so a C call it makes straight from that level (``loss.item()``,
``time.sleep``), which no Python frame below it shows, would be named only ``train.py
<module>``; the line is what names it, as torch.profiler names it by the built-in's range."""


def stack_frames(frame: Any) -> list[tuple[CodeType, int]]:
    """(code, line) of a frame and its callers, innermost first (at most `MAX_DEPTH`): line 0
    for a function (its first line names it), the running line for module-level code
    (`MODULE_CODE`)."""
    out = []
    while frame is not None and len(out) < MAX_DEPTH:
        code = frame.f_code
        out.append((code, (frame.f_lineno or 0) if code.co_name == MODULE_CODE else 0))
        frame = frame.f_back
    return out


def _deltas(times: array) -> list[int]:
    """First stamp, then the gaps: a window's samples fit in a few bytes each as text."""
    out: list[int] = []
    prev = 0
    for t in times:
        out.append(t - prev)
        prev = t
    return out


_ROOTS: list[str] | None = None


def _roots() -> list[str]:
    global _ROOTS
    if _ROOTS is None:
        roots = {os.path.abspath(p or os.getcwd()) for p in sys.path}
        _ROOTS = sorted((r.rstrip(os.sep) + os.sep for r in roots if os.path.isdir(r)),
                        key=len, reverse=True)
    return _ROOTS


def frame_of(code: CodeType, line: int = 0) -> tuple[str, int, str]:
    """(file, first line, function) as torch.profiler names a Python frame: the file relative
    to the longest ``sys.path`` entry it lies under (``train.py``, ``torch/nn/modules/module.py``),
    the line the function starts at (``line`` instead where given: module-level code's running
    line, `stack_frames`), ``co_name``."""
    file = code.co_filename
    if file and not file.startswith("<"):
        with contextlib.suppress(ValueError):
            full = os.path.abspath(file)
            for root in _roots():
                if full.startswith(root):
                    file = full[len(root):]
                    break
    return file, line or code.co_firstlineno, code.co_name
