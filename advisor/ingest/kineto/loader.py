"""torch.profiler / Kineto Chrome traces (``.json``, ``.json.gz``, ``.json.xz``) -> `OpGraph`.

One pass streams the events (`event_stream`) through `event_mapper.EventMapper`; then this
module settles what needs the whole file:

* **Host pids of GPU work.** Kineto draws GPU rows under the device index as pid, but joins in
  the graph use ``(pid, correlation)`` of the launching process, so each GPU op and sync wait
  takes the pid (and, for syncs, the tid) of the runtime call with its correlation id. Ops whose
  call is not in the trace (launched before tracing began) take the process that launched the
  rest of that device's work. One file is one process (one rank) in practice; if a merged file
  holds several, a correlation id is matched to the call of that id that started last before
  the op.
* **The window.** Every event becomes a node first, then only ``LoadOptions.max_steps``
  steady-state steps' worth is kept when the trace has more (`TraceInfo.totals` keeps the
  whole-trace counts). Memory thus peaks at the whole trace's nodes, not its JSON, for the
  short moment before the cut; torch.profiler traces usually hold only a few active steps.
* **Trace facts.** GPUs from ``deviceProperties``, versions, rank, and plain notes for what the
  trace lacks (GPU work, deviceProperties) or is (ROCm rather than CUDA).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from advisor.errors import UnsupportedTraceError
from advisor.gc_pause import gc_paused
from advisor.graph.build import build_graph
from advisor.graph.model import ApiCall, GpuInfo, GpuOp, OpGraph, Step, SyncWait, TraceInfo
from advisor.graph.step_pattern import compile_step_pattern
from advisor.graph.steps import steps_from_ranges
from advisor.ingest.base import LoadOptions, TraceSource
from advisor.ingest.compression import codec_of
from advisor.ingest.input_file import UnpackLimits
from advisor.ingest.kineto.event_mapper import Collected, EventMapper, clean_text
from advisor.ingest.kineto.event_record import EventRecord, records_decoder
from advisor.ingest.kineto.event_stream import (
    TraceDocument,
    gzip_head,
    iter_event_batches,
    looks_like_json,
)

FORMAT = "kineto-json"
_LEADING_SLOW = 2.0  # as `steps.WARMUP_SLOW_FACTOR`: such leading steps are warm-up, not kept


class ChromeTraceSource(TraceSource):
    format = FORMAT

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        """JSON text, or gzip/xz holding JSON (or named ``*.json.gz``/``*.json.xz``, so a bad one
        gets our error)."""
        if codec_of(head):
            return ".json" in path.suffixes or looks_like_json(gzip_head(path))
        return looks_like_json(head)

    def load(self, path: Path, options: LoadOptions) -> OpGraph:
        with gc_paused():
            return _load(path, options)


def _load(path: Path, options: LoadOptions) -> OpGraph:
    """One pass over the events, then what needs the whole file (see the module's notes)."""
    doc = TraceDocument()
    collected = _read_events(path, doc, options.unpack_limits)
    return _graph(path, doc, collected, options)


def load_decoded(path: Path, events: list[Any], metadata: dict[str, Any],
                 options: LoadOptions) -> OpGraph:
    """The graph of events already decoded (as `event_stream` decodes them) by a caller that
    held the whole text anyway: the job path's slim reader (`advisor.ingest.slim_trace`), which
    read the file to pick the events a rank summary uses. Reading the file again through the
    stream cost a rank a second decompression and decode (issue #39)."""
    doc = TraceDocument(metadata=metadata, event_count=len(events), has_event_list=True)
    with gc_paused():
        mapper = EventMapper()
        add = mapper.add_record if events and type(events[0]) is EventRecord else mapper.add
        for index, event in enumerate(events):
            add(index, event)
        return _graph(path, doc, mapper.out, options)


def _graph(path: Path, doc: TraceDocument, collected: Collected, options: LoadOptions) -> OpGraph:
    """What needs every event read: the checks, the pids, the window and the graph."""
    _check_is_trace(path, doc, collected)
    _resolve_gpu_pids(collected)
    _remap_cpu_events_on_gpu_rows(collected)
    info = _trace_info(path, doc, collected)  # whole-trace facts, before the window
    named_steps = steps_from_ranges(collected.ranges,
                                    compile_step_pattern(options.step_pattern), options.pid)
    info.totals["steps"] = len(named_steps)
    if named_steps:
        window = _step_window(named_steps, options.max_steps)
    else:
        window = _gpu_op_window(collected, options.max_gpu_ops)
    if window is not None:
        _keep_window(collected, window)
        info.notes.append(_window_note(window, collected, info))
    info.window_ns = window or _span(collected)
    _add_linkage_note(info, collected)
    return build_graph(info, collected.ranges, collected.api_calls, collected.gpu_ops,
                       collected.syncs, step_pattern=options.step_pattern, pid=options.pid)


def _read_events(path: Path, doc: TraceDocument, limits: UnpackLimits) -> Collected:
    """Stream every event through the mapper (the caller pauses the garbage collector): as
    records where a batch decodes as such (`event_record`), else as the values decoded."""
    mapper = EventMapper()
    index = 0
    for batch in iter_event_batches(path, doc, limits=limits, records=records_decoder()):
        add = mapper.add_record if type(batch[0]) is EventRecord else mapper.add
        for event in batch:
            add(index, event)
            index += 1
    return mapper.out


# ----- validation ----------------------------------------------------------------------------


def _check_is_trace(path: Path, doc: TraceDocument, collected: Collected) -> None:
    """Reject JSON that is not a torch.profiler trace, with the reason in one sentence."""
    if not doc.has_event_list:
        raise UnsupportedTraceError(
            f"{path}: JSON without a traceEvents list, so not a torch.profiler trace")
    if doc.event_count == 0:
        raise UnsupportedTraceError(f"{path}: an empty torch.profiler trace (no events)")
    if collected.counts["not_events"] == doc.event_count:
        raise UnsupportedTraceError(
            f"{path}: JSON whose event list holds no trace events, so not a torch.profiler trace")
    if not (collected.ranges or collected.api_calls or collected.gpu_ops or collected.syncs):
        raise UnsupportedTraceError(
            f"{path}: a Chrome trace without torch.profiler events (no CPU operators, CUDA "
            f"calls or kernels)")


# ----- pids ----------------------------------------------------------------------------------


class _Launchers:
    """Correlation id -> the calls with that id, for `launcher_of`. A merged file of several
    processes may hold a few calls per id; a defective one, thousands: the calls of an id are
    kept sorted by start so that each op finds its call by bisection, never by a scan of all of
    them (that scan made a trace whose ids are all equal quadratic in time)."""

    def __init__(self, calls: list[ApiCall]) -> None:
        by_correlation: dict[int, list[ApiCall]] = defaultdict(list)
        for call in calls:
            by_correlation[call.correlation].append(call)
        self._calls = by_correlation
        self._sorted: dict[int, tuple[list[int], list[ApiCall]]] = {}

    def launcher_of(self, correlation: int | None, start_ns: int) -> ApiCall | None:
        """Of the calls with this id, the one that started last at or before ``start_ns``
        (the first such in trace order on a tie), else the id's first call; None if none."""
        calls = self._calls.get(correlation) if correlation is not None else None
        if not calls:
            return None
        if len(calls) == 1:
            return calls[0]
        ordered = self._sorted.get(correlation)
        if ordered is None:
            by_start = sorted(calls, key=lambda c: c.start_ns)  # stable: trace order on ties
            ordered = self._sorted[correlation] = ([c.start_ns for c in by_start], by_start)
        starts, by_start = ordered
        i = bisect_right(starts, start_ns)
        if i == 0:
            return calls[0]
        return by_start[bisect_left(starts, starts[i - 1])]


def _main_host_pid(collected: Collected) -> int | None:
    """The process that made the most CUDA calls (else recorded the most ranges)."""
    counts = Counter(c.pid for c in collected.api_calls if c.pid not in collected.gpu_rows)
    if not counts:
        counts = Counter(r.pid for r in collected.ranges if r.pid not in collected.gpu_rows)
    return counts.most_common(1)[0][0] if counts else None


def _resolve_gpu_pids(collected: Collected) -> None:
    """Give GPU ops and sync waits the host pid (and tid) of their launching call."""
    launchers = _Launchers(collected.api_calls)
    owners: dict[int, Counter[int]] = defaultdict(Counter)
    unlinked: list[GpuOp | SyncWait] = []
    for item in [*collected.gpu_ops, *collected.syncs]:
        call = launchers.launcher_of(item.correlation, item.start_ns)
        if call is None:
            unlinked.append(item)
            continue
        item.pid = call.pid
        if isinstance(item, SyncWait):
            item.tid = call.tid
        else:
            owners[item.device][call.pid] += 1
    fallback = _main_host_pid(collected)
    for item in unlinked:
        device = item.device if item.device is not None else -1
        if owners.get(device):
            item.pid = owners[device].most_common(1)[0][0]
        elif fallback is not None:
            item.pid = fallback


def _remap_cpu_events_on_gpu_rows(collected: Collected) -> None:
    """Host events drawn on a GPU row (Kineto files some Python threads under pid 0) belong to
    the host process: leaving them there would mix them with the device's pid."""
    device_pids = set(collected.gpu_rows) | {
        pid for pid, label in collected.process_labels.items() if label.startswith("GPU")}
    main = _main_host_pid(collected)
    if main is None or main in device_pids:
        return
    for rng in collected.ranges:
        if rng.pid in device_pids:
            rng.pid = main
    for call in collected.api_calls:
        if call.pid in device_pids:
            call.pid = main


# ----- window --------------------------------------------------------------------------------


def _step_window(steps: list[Step], max_steps: int) -> tuple[int, int] | None:
    """[start, end) covering warm-up plus ``max_steps`` steps per thread, None if all fit."""
    per_thread: dict[tuple[int, int], list[Step]] = defaultdict(list)
    for step in steps:
        per_thread[(step.pid, step.tid)].append(step)
    starts, ends, trimmed = [], [], False
    for thread_steps in per_thread.values():
        thread_steps.sort(key=lambda s: s.cpu_start_ns)
        keep = 1 + _leading_slow(thread_steps) + max_steps
        trimmed |= len(thread_steps) > keep
        kept = thread_steps[:keep]
        starts.append(kept[0].cpu_start_ns)
        ends.append(kept[-1].cpu_end_ns)
    return (min(starts), max(ends)) if trimmed else None


def _leading_slow(steps: list[Step]) -> int:
    """Steps after the first that are still warming up (host time, as GPU time is not known
    yet); they are kept on top of ``max_steps`` so the window still holds that many steady."""
    if len(steps) < 3:
        return 0
    median = statistics.median(s.cpu_ns for s in steps[1:])
    count = 0
    for step in steps[1:]:
        if step.cpu_ns <= _LEADING_SLOW * median:
            break
        count += 1
    return count


def _gpu_op_window(collected: Collected, max_gpu_ops: int) -> tuple[int, int] | None:
    """Without step marks, cap the GPU ops: keep those launched before the cap-th one."""
    if len(collected.gpu_ops) <= max_gpu_ops:
        return None
    launchers = _Launchers(collected.api_calls)

    def launched_at(op: GpuOp) -> int:
        call = launchers.launcher_of(op.correlation, op.start_ns)
        return call.start_ns if call is not None else op.start_ns

    times = sorted(launched_at(op) for op in collected.gpu_ops)
    return (_span(collected)[0], times[max_gpu_ops])


def _keep_window(collected: Collected, window: tuple[int, int]) -> None:
    """Keep calls starting in the window, ranges overlapping it, and the GPU work those calls
    launched (GPU work with no call in the trace: when it overlaps the window)."""
    lo, hi = window
    every_correlation = {(c.pid, c.correlation) for c in collected.api_calls}
    collected.api_calls = [c for c in collected.api_calls if lo <= c.start_ns < hi]
    kept = {(c.pid, c.correlation) for c in collected.api_calls}
    collected.ranges = [r for r in collected.ranges if r.start_ns < hi and r.end_ns > lo]

    def keep(item: GpuOp | SyncWait) -> bool:
        key = (item.pid, item.correlation)
        if key in every_correlation:
            return key in kept
        return item.start_ns < hi and item.end_ns > lo

    collected.gpu_ops = [op for op in collected.gpu_ops if keep(op)]
    collected.syncs = [s for s in collected.syncs if keep(s)]


def _span(collected: Collected) -> tuple[int, int]:
    """[first start, last end) over every node read."""
    lo, hi = None, None
    for items in (collected.ranges, collected.api_calls, collected.gpu_ops, collected.syncs):
        if items:
            first = min(i.start_ns for i in items)
            last = max(i.end_ns for i in items)
            lo = first if lo is None else min(lo, first)
            hi = last if hi is None else max(hi, last)
    return (lo or 0, hi or 0)


def _window_note(window: tuple[int, int], collected: Collected, info: TraceInfo) -> str:
    return (f"only part of the trace is loaded in detail ({len(collected.gpu_ops)} of "
            f"{info.totals.get('gpu_ops', 0)} GPU ops, {window[1] - window[0]} ns); whole-trace "
            f"counts are in the totals")


# ----- trace facts ---------------------------------------------------------------------------


def _trace_info(path: Path, doc: TraceDocument, collected: Collected) -> TraceInfo:
    meta = doc.metadata
    counts = collected.counts
    info = TraceInfo(path=str(path), format=FORMAT,
                     schema_version=str(meta.get("schemaVersion", "")))
    info.totals = {
        "events": doc.event_count,
        "kernels": counts["kernels"],
        "memcpys": counts["memcpys"],
        "memsets": counts["memsets"],
        "gpu_ops": len(collected.gpu_ops),
        "syncs": counts["syncs"],
        "api_calls": counts["api_calls"],
        "cpu_ops": counts["cpu_ops"],
        "annotations": counts["annotations"],
        "python_functions": counts["python_functions"],
    }
    info.gpus = _gpus(meta.get("deviceProperties"), {op.device for op in collected.gpu_ops})
    info.software = _software(meta)
    info.processes, info.threads = _host_names(collected)
    info.notes.extend(_notes(meta, collected, info))
    info.rank, info.world_size = _rank(meta.get("distributedInfo"))
    return info


def _rank(dist: Any) -> tuple[int | None, int | None]:
    """(rank, world size) from Kineto's ``distributedInfo``; None where it says nothing usable."""
    if not isinstance(dist, dict):
        return None, None

    def as_int(v: Any) -> int | None:
        try:
            return int(v) if v is not None and not isinstance(v, bool) else None
        except (TypeError, ValueError):
            return None

    return as_int(dist.get("rank")), as_int(dist.get("world_size"))


def _gpus(properties: Any, used: set[int]) -> list[GpuInfo]:
    """GpuInfo for the devices this process used (all listed ones when it used none)."""
    if not isinstance(properties, list):
        return []
    gpus = []
    for prop in properties:
        if not isinstance(prop, dict) or type(prop.get("id")) is not int:
            continue
        if used and prop["id"] not in used:
            continue
        major, minor = prop.get("computeMajor"), prop.get("computeMinor")
        gpus.append(GpuInfo(
            device=prop["id"], name=clean_text(prop.get("name", "")),
            sm_count=prop.get("numSms") if type(prop.get("numSms")) is int else None,
            memory_bytes=(prop.get("totalGlobalMem")
                          if type(prop.get("totalGlobalMem")) is int else None),
            compute_capability=f"{major}.{minor}" if major is not None else None,
        ))
    return gpus


def _cuda_version(value: Any) -> str:
    """CUDA's integer version (12040) -> "12.4"."""
    if type(value) is not int:
        return ""
    return f"{value // 1000}.{value % 1000 // 10}"


def _software(meta: dict[str, Any]) -> dict[str, str]:
    software = {"profiler": "torch.profiler (Kineto)"}
    for key, name in (("cuda_runtime_version", "cuda"), ("cuda_driver_version", "cuda_driver")):
        version = _cuda_version(meta.get(key))
        if version:
            software[name] = version
    if meta.get("cupti_version") is not None:
        software["cupti"] = str(meta["cupti_version"])
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and dist.get("nccl_version"):
        software["nccl"] = str(dist["nccl_version"])
    return software


def _host_names(collected: Collected) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    host = {r.pid for r in collected.ranges} | {c.pid for c in collected.api_calls}
    processes = {pid: name for pid, name in collected.process_names.items() if pid in host}
    threads = {k: v for k, v in collected.thread_names.items() if k[0] in host}
    return processes, threads


def _notes(meta: dict[str, Any], collected: Collected, info: TraceInfo) -> list[str]:
    notes = []
    if not collected.gpu_ops:
        notes.append("no GPU work in this trace")
    if collected.counts["profiler_ranges"]:
        notes.append("the trace was taken in CUPTI range-profiler mode, which records no "
                     "per-kernel activity")
    if not isinstance(meta.get("deviceProperties"), list):
        notes.append("the trace has no deviceProperties, so the GPU model is unknown")
    if _is_rocm(collected, info):
        notes.append("a ROCm trace of an AMD GPU, not NVIDIA: HIP calls are read as CUDA "
                     "runtime calls, and CUDA- or H100-specific advice may not apply")
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and "rank" in dist:
        size = dist.get("world_size")
        of = f" of {size}" if size is not None else ""
        backend = f" ({dist['backend']})" if dist.get("backend") else ""
        notes.append(f"one rank of a distributed job: rank {dist['rank']}{of}{backend}; other "
                     f"ranks are in their own trace files")
    if collected.counts["no_timestamp"]:
        notes.append(f"{collected.counts['no_timestamp']} events without a timestamp were "
                     f"skipped")
    if collected.counts["no_duration"]:
        notes.append(f"{collected.counts['no_duration']} events with a duration that is not a "
                     f"number were read as instants (0 ns): their time is missing from the "
                     f"analysis")
    return notes


def _is_rocm(collected: Collected, info: TraceInfo) -> bool:
    names = {c.name for c in collected.api_calls[:1000]}
    return any(n.startswith("hip") for n in names) or any(
        "AMD" in g.name or "Radeon" in g.name or "Instinct" in g.name for g in info.gpus)


def _add_linkage_note(info: TraceInfo, collected: Collected) -> None:
    """Say how many GPU ops have no launching call: they ran work launched before tracing."""
    calls = {(c.pid, c.correlation) for c in collected.api_calls}
    orphans = sum(1 for op in collected.gpu_ops if (op.pid, op.correlation) not in calls)
    if orphans:
        info.notes.append(f"{orphans} of {len(collected.gpu_ops)} GPU ops have no launching "
                          f"call in the trace (launched before tracing started)")
