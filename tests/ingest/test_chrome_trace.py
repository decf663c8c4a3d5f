"""ChromeTraceSource on the real torch.profiler traces in shared/traces (see its SOURCES.md).

Every expectation here was read off the trace files themselves or off SOURCES.md; no trace is
synthesized, and broken inputs are cut from real files in tmp_path.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from advisor.errors import TraceFormatError, UnsupportedTraceError
from advisor.graph.model import ApiLayer, GpuOpKind, OpGraph, RangeSource, SyncKind
from advisor.ingest.base import LoadOptions
from advisor.ingest.kineto.loader import ChromeTraceSource

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
SCENARIOS = sorted((REPO / "fixtures" / "scenarios").glob("*/*/trace.json.gz"))

pytestmark = pytest.mark.skipif(
    not (TRACES / "SOURCES.md").exists(),
    reason=f"shared traces not found at {TRACES} (they sit beside the repository)",
)

RESNET0 = "kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
RESNET4 = "kineto/tb_plugin_samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
ALEXNET = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
EVENT_SYNC = "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"
NS_TRACE = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
AMD = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CUPTI_RANGE = "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
TRITON = "hta/triton_example/triton_example.json.gz"
GPU_ANNOTATION = "hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz"
NCCL = "hta/nccl_parser_config/nccl_data.json.gz"
BERT = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
B200 = "tracelens/b200/eager_trace.json.gz"


def _kineto_table() -> dict[str, int]:
    """SOURCES.md's Kineto table: file -> its "kernel events" column."""
    text = (TRACES / "SOURCES.md").read_text() if (TRACES / "SOURCES.md").exists() else ""
    section = text.split("### Kineto", 1)[-1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("|")]
    if not rows:
        return {}
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    col = header.index("kernel events")
    table = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        table[cells[0].strip("`")] = int(cells[col].replace(",", ""))
    return table


KINETO = _kineto_table()
_cache: dict[str, OpGraph] = {}


def load(rel: str, **options: int) -> OpGraph:
    """Load a shared trace (default options are cached: the graphs are only read)."""
    if options:
        return ChromeTraceSource().load(TRACES / rel, LoadOptions(**options))
    if rel not in _cache:
        _cache[rel] = ChromeTraceSource().load(TRACES / rel, LoadOptions())
    return _cache[rel]


def _raw(rel: str) -> dict:
    with gzip.open(TRACES / rel) as f:
        return json.load(f)


# ----- every trace ---------------------------------------------------------------------------


def test_sources_table_lists_the_kineto_traces():
    assert len(KINETO) == 23
    assert all((TRACES / rel).exists() for rel in KINETO)


@pytest.mark.parametrize("rel", sorted(KINETO))
def test_every_shared_trace_loads_with_the_documented_kernel_count(rel):
    graph = load(rel)
    assert graph.info.format == "kineto-json"
    assert graph.info.totals["kernels"] == KINETO[rel]
    # No shared trace has more steps than the default window: every kernel is loaded in detail.
    assert sum(1 for _ in graph.kernels()) == KINETO[rel]
    assert graph.info.window_ns is not None
    lo, hi = graph.info.window_ns
    assert all(lo <= op.start_ns and op.end_ns <= hi for op in graph.gpu_ops)


@pytest.mark.parametrize("rel", sorted(KINETO))
def test_gpu_work_carries_the_launching_process_pid(rel):
    """Kineto draws GPU rows under the device index; joins need the host pid."""
    graph = load(rel)
    host_pids = {call.pid for call in graph.api_calls}
    assert all(op.pid in host_pids for op in graph.gpu_ops)
    assert all(s.pid in host_pids for s in graph.syncs)


@pytest.mark.parametrize("rel", sorted(KINETO))
def test_unlinked_gpu_ops_were_launched_before_tracing_began(rel):
    """An op without a launching call has a correlation id older than every traced call."""
    graph = load(rel)
    orphans = [op for op in graph.gpu_ops if graph.launcher(op) is None]
    if not orphans:
        return
    first = min(c.correlation for c in graph.api_calls if c.correlation >= 0)
    assert all(op.correlation is not None and op.correlation < first for op in orphans)
    assert any("launched before tracing started" in n for n in graph.info.notes)


@pytest.mark.parametrize("rel", sorted(rel for rel, kernels in KINETO.items() if kernels))
def test_most_kernels_have_a_launcher(rel):
    """Over the traces that have kernels (SOURCES.md's count; the kernel-count test above
    checks that count, zero included, on every trace)."""
    graph = load(rel)
    kernels = list(graph.kernels())
    linked = sum(1 for k in kernels if graph.launcher(k) is not None)
    assert linked / len(kernels) > 0.7  # Qwen: 1029/1465, the rest predate the trace


def test_clean_traces_link_every_gpu_op():
    for rel in (RESNET0, RESNET4, ALEXNET, NS_TRACE, "hta/df_index_resolver/df_index_resolver.json.gz"):
        graph = load(rel)
        assert all(graph.launcher(op) is not None for op in graph.gpu_ops), rel


def test_loading_leaves_the_file_untouched(tmp_path):
    path = TRACES / RESNET0
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    ChromeTraceSource().load(path, LoadOptions())
    after = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    assert before == after
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_ids_are_unique_across_node_kinds_and_stable():
    first = ChromeTraceSource().load(TRACES / ALEXNET, LoadOptions())
    again = ChromeTraceSource().load(TRACES / ALEXNET, LoadOptions())
    ids = [n.id for n in (*first.ranges, *first.api_calls, *first.gpu_ops, *first.syncs)]
    assert len(ids) == len(set(ids))
    assert [op.id for op in first.gpu_ops] == [op.id for op in again.gpu_ops]


# ----- steps and phases ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "numbers"),
    [
        (RESNET0, range(5, 11)),
        (RESNET4, range(5, 11)),
        ("hta/df_index_resolver/df_index_resolver.json.gz", range(2, 7)),
        (NCCL, range(4, 7)),
        (NS_TRACE, range(101, 106)),
        ("hta/trace_diff/control/control.json.gz", range(1009, 1015)),
        (BERT, [6]),
    ],
)
def test_profiler_steps_become_steps(rel, numbers):
    graph = load(rel)
    assert [s.index for s in graph.steps] == list(numbers)
    assert all(s.name == f"ProfilerStep#{s.index}" for s in graph.steps)
    assert graph.info.totals["steps"] == len(numbers)
    if len(numbers) >= 3:
        assert graph.steps[0].warmup
        assert graph.steady_steps


@pytest.mark.parametrize("rel", [RESNET0, RESNET4])
def test_resnet50_steps_have_data_and_optimizer_phases(rel):
    for step in load(rel).steps:
        assert set(step.phases) == {"data", "optimizer"}
        (data_start, _), *_ = step.phases["data"]
        assert data_start - step.cpu_start_ns < step.cpu_ns / 10  # the step opens by loading


def test_resnet50_step_time_matches_its_profiler_steps():
    """Step time is GPU-side; a training step that syncs each iteration takes about as long
    on the device as ProfilerStep#N lasts on the host."""
    graph = load(RESNET0)
    raw = _raw(RESNET0)["traceEvents"]
    marked = [e["dur"] * 1000 for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")]
    steady = [s.time_ns for s in graph.steady_steps]
    assert len(steady) == 5
    assert 0.9 < statistics.median(steady) / statistics.median(marked) < 1.1
    for step in graph.steady_steps:
        ops = graph.step_ops(step)
        assert ops
        assert sum(op.duration_ns for op in ops) <= step.time_ns  # one stream: no overlap


def test_trace_without_profiler_steps_falls_back_to_the_launch_pattern():
    """Despite its name this HTA trace has no ProfilerStep ranges, only optimizer ones."""
    graph = load(GPU_ANNOTATION)
    assert graph.info.totals["steps"] == 0
    assert any("launch sequence" in n for n in graph.info.notes)
    assert len(graph.steps) >= 3
    assert all("optimizer" in s.phases for s in graph.steps)


# ----- event mapping -------------------------------------------------------------------------


def test_2021_format_categories_and_string_tids():
    graph = load(RESNET0)
    assert {r.tid for r in graph.ranges} <= {25738, 25772}  # written as strings in the file
    assert all(op.stream == 7 and op.device == 0 for op in graph.gpu_ops)  # tid "stream 7"
    kinds = Counter(op.kind for op in graph.gpu_ops)
    assert kinds == {GpuOpKind.KERNEL: 8772, GpuOpKind.MEMCPY: 12, GpuOpKind.MEMSET: 312}
    steps = [r for r in graph.ranges if r.name.startswith("ProfilerStep#")]
    assert steps and all(r.source is RangeSource.ANNOTATION for r in steps)
    assert all(c.layer is ApiLayer.RUNTIME for c in graph.api_calls)


def test_copies_carry_kind_host_memory_and_bytes():
    copies = [op for op in load(ALEXNET).gpu_ops if op.kind is GpuOpKind.MEMCPY]
    first = copies[0]
    assert (first.name, first.copy_kind, first.host_memory, first.bytes) == (
        "Memcpy HtoD (Pageable -> Device)", "HtoD", "pageable", 92928)
    pinned = [op for op in load(BERT).gpu_ops if op.kind is GpuOpKind.MEMCPY]
    assert [(op.copy_kind, op.host_memory) for op in pinned] == [("DtoH", "pinned")]
    memsets = [op for op in load(ALEXNET).gpu_ops if op.kind is GpuOpKind.MEMSET]
    assert len(memsets) == 3 and all(op.bytes > 0 for op in memsets)


def test_kernels_carry_launch_geometry():
    kernels = list(load(ALEXNET).kernels())
    assert all(k.grid and k.block for k in kernels)
    offsets = next(k for k in kernels if k.name.startswith("void cask_cudnn::computeOffsets"))
    assert (offsets.grid, offsets.block) == ((12, 1, 1), (256, 1, 1))


def test_operators_carry_input_shapes_and_dtypes():
    graph = load(BERT)
    op = next(r for r in graph.ranges if r.name == "aten::slice")
    assert op.source is RangeSource.OPERATOR
    assert op.shapes == ((1, 512), (), (), (), ())
    assert op.dtypes == ("long int", "Scalar", "Scalar", "Scalar", "Scalar")
    assert any(r.source is RangeSource.PYTHON for r in graph.ranges)


def test_cuda_sync_events_become_sync_waits_on_the_waiting_thread():
    graph = load(ALEXNET)
    assert Counter(s.kind for s in graph.syncs) == {
        SyncKind.STREAM_WAIT_EVENT: 20, SyncKind.STREAM: 16, SyncKind.DEVICE: 5}
    calls = graph.api_by_correlation
    for sync in graph.syncs:
        call = calls[(sync.pid, sync.correlation)]
        assert sync.tid == call.tid
    context = [s for s in graph.syncs if s.kind is SyncKind.DEVICE]
    assert all(s.stream is None for s in context)  # CUPTI writes 2**32-1 / -1 for "no stream"
    event_syncs = [s for s in load(EVENT_SYNC).syncs if s.kind is SyncKind.EVENT]
    assert len(event_syncs) == 2


def test_driver_launches_link_their_kernels():
    graph = load(TRITON)
    (kernel,) = graph.kernels()
    call = graph.launcher(kernel)
    assert call is not None
    assert (call.name, call.layer) == ("cuLaunchKernel", ApiLayer.DRIVER)


def test_fractional_epoch_microseconds_convert_to_exact_nanoseconds():
    """1712195495519695.812 us has more digits than a float holds; the ns must be exact."""
    graph = load(NS_TRACE)
    op = next(r for r in graph.ranges if r.id == 1)
    assert op.name == "DivBackward1"
    assert (op.start_ns, op.duration_ns) == (1712195495519695812, 53090)


# ----- trace facts ---------------------------------------------------------------------------


def test_device_properties_become_gpu_info():
    info = load(BERT).info
    (gpu,) = info.gpus
    assert (gpu.device, gpu.name, gpu.sm_count, gpu.compute_capability) == (
        0, "NVIDIA H100 80GB HBM3", 132, "9.0")
    assert gpu.memory_bytes == 85018279936
    assert info.software["cuda"] == "12.4" and info.software["cuda_driver"] == "12.9"
    assert info.notes == []


def test_gpu_info_lists_the_devices_this_rank_used():
    info = load("hta/trace_diff/control/control.json.gz").info
    assert [g.device for g in info.gpus] == [3]
    assert any("rank 3 of 8" in n for n in info.notes)


def test_private_trace_names_stay_out_of_the_info():
    for rel in (NCCL, NS_TRACE, BERT):
        raw = _raw(rel)
        info = load(rel).info
        shown = repr((info.notes, info.software, info.processes, info.threads, info.gpus))
        for key in ("traceName", "trace_id", "host_name", "username"):
            if isinstance(raw.get(key), str) and raw[key]:
                assert raw[key] not in shown


def test_rocm_trace_loads_with_a_note():
    graph = load(AMD)
    assert any("ROCm" in n and "not NVIDIA" in n for n in graph.info.notes)
    assert any(c.name.startswith("hip") for c in graph.api_calls)
    assert len(graph.gpu_ops) == 16 and all(op.device == 2 for op in graph.gpu_ops)
    assert all(graph.launcher(op) is not None for op in graph.gpu_ops)
    copy = next(op for op in graph.gpu_ops if op.kind is GpuOpKind.MEMCPY)
    assert (copy.copy_kind, copy.host_memory) == ("HtoD", "")  # "Host -> Device": unknown kind


def test_trace_without_gpu_work_is_valid():
    graph = load(CUPTI_RANGE)
    assert not graph.gpu_ops and graph.api_calls
    assert "no GPU work in this trace" in graph.info.notes
    assert any("range-profiler" in n for n in graph.info.notes)


def test_python_threads_drawn_on_the_gpu_row_move_to_the_host_process():
    graph = load(BERT)
    assert {r.pid for r in graph.ranges} == {19392}
    assert graph.info.processes == {19392: "python3"}  # not the GPU row's pid 0


# ----- load options --------------------------------------------------------------------------


def test_max_steps_keeps_a_window_and_whole_trace_totals():
    graph = load(RESNET0, max_steps=2)
    assert [s.index for s in graph.steps] == [5, 6, 7]
    assert [s.warmup for s in graph.steps] == [True, False, False]
    assert graph.info.totals["kernels"] == 8772 and graph.info.totals["steps"] == 6
    kept = sum(1 for _ in graph.kernels())
    assert 0 < kept < 8772
    lo, hi = graph.info.window_ns
    assert all(lo <= c.start_ns < hi for c in graph.api_calls)
    assert all(graph.launcher(op) is not None for op in graph.gpu_ops)
    assert any("only part of the trace" in n for n in graph.info.notes)


def test_max_gpu_ops_caps_a_trace_without_step_marks():
    graph = load(B200, max_gpu_ops=300)
    assert len(graph.gpu_ops) == 300
    assert graph.info.totals["gpu_ops"] == 929
    # with step marks the cap does not apply: steps bound the window instead
    assert len(load(RESNET0, max_gpu_ops=300).gpu_ops) == 9096


# ----- input formats and errors --------------------------------------------------------------


def test_plain_json_loads_like_gzip(tmp_path):
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((TRACES / ALEXNET).read_bytes()))
    assert ChromeTraceSource.sniff(plain, plain.read_bytes()[:64])
    graph = ChromeTraceSource().load(plain, LoadOptions())
    assert len(graph.gpu_ops) == len(load(ALEXNET).gpu_ops)


def test_sniff_claims_kineto_traces_and_nothing_else():
    for rel in (ALEXNET, RESNET0):
        head = (TRACES / rel).read_bytes()[:64]
        assert ChromeTraceSource.sniff(TRACES / rel, head)
    for other in (*TRACES.glob("*/*.sqlite"), *TRACES.glob("nvfuser/*/*.nsys-rep")):
        assert not ChromeTraceSource.sniff(other, other.read_bytes()[:64]), other


def _error(path: Path) -> Exception:
    with pytest.raises((TraceFormatError, UnsupportedTraceError)) as caught:
        ChromeTraceSource().load(path, LoadOptions())
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    return caught.value


def test_truncated_gzip_is_a_format_error(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes((TRACES / ALEXNET).read_bytes()[:10_000])
    err = _error(cut)
    assert isinstance(err, TraceFormatError) and "truncated gzip" in str(err)


@pytest.mark.parametrize("keep", [30, 200_000])
def test_truncated_json_is_a_format_error(tmp_path, keep):
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress((TRACES / ALEXNET).read_bytes())[:keep])
    err = _error(cut)
    assert isinstance(err, TraceFormatError) and "truncated JSON" in str(err)


def test_corrupt_json_between_events_is_a_format_error(tmp_path):
    text = gzip.decompress((TRACES / ALEXNET).read_bytes())
    at = text.index(b"},", 100_000) + 1
    bad = tmp_path / "bad.json"
    bad.write_bytes(text[:at] + b"@@" + text[at:])
    err = _error(bad)
    assert isinstance(err, TraceFormatError) and "malformed JSON" in str(err)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"a": 1}', "without a traceEvents list"),
        (b"[1, 2, 3]", "holds no trace events"),
        (b'{"traceEvents": []}', "empty torch.profiler trace"),
        (b"not json at all", "not JSON"),
    ],
)
def test_json_that_is_not_a_trace_is_unsupported(tmp_path, content, says):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    err = _error(path)
    assert isinstance(err, UnsupportedTraceError) and says in str(err)


def test_gzip_without_a_chrome_trace_is_rejected(tmp_path):
    sqlite = next(TRACES.glob("pipit/*.sqlite"))
    path = tmp_path / "report.json.gz"
    path.write_bytes(gzip.compress(sqlite.read_bytes()[:100_000]))
    err = _error(path)
    assert isinstance(err, UnsupportedTraceError)
    assert "gzip file that does not hold JSON" in str(err)
    assert not ChromeTraceSource.sniff(tmp_path / "report.gz", path.read_bytes()[:64])


def test_load_trace_picks_this_source():
    pytest.importorskip("advisor.ingest.nsys.loader", reason="load_trace imports every source")
    from advisor.ingest.base import load_trace

    assert load_trace(TRACES / BERT).info.format == "kineto-json"


# ----- our own H100 captures -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", SCENARIOS or [pytest.param(None, marks=pytest.mark.skip(
        reason="no H100 captures in fixtures/scenarios yet"))],
    ids=lambda p: "/".join(p.parts[-3:-1]) if p else "none",
)
def test_h100_scenario_captures_load(path):
    graph = ChromeTraceSource().load(path, LoadOptions())
    assert graph.info.totals["kernels"] > 0
    assert any(re.search("H100", g.name) for g in graph.info.gpus)
    assert graph.steps
    # Kernels the GPU was still running from launches before the trace began have no launcher;
    # every kernel launched inside the trace must be linked to its call.
    first_call = min(c.correlation for c in graph.api_calls)
    kernels = [k for k in graph.kernels() if k.correlation is not None and k.correlation >= first_call]
    linked = sum(1 for k in kernels if graph.launcher(k) is not None)
    assert kernels and linked / len(kernels) > 0.99
