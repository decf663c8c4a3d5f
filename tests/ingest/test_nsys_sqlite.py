"""Loading real Nsight Systems exports: counts, correlation, windows, broken inputs.

Every trace here is a real capture (see ../shared/traces/SOURCES.md); broken inputs are copies of
one, truncated or altered in tmp_path. Expected numbers are SOURCES.md's row counts.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from advisor.errors import TraceFormatError
from advisor.graph.model import ApiLayer, GpuOpKind, SyncKind
from advisor.ingest.base import LoadOptions, load_trace

REPO = Path(__file__).parents[2]
TRACES = REPO.parent / "shared" / "traces"
SCENARIO_EXPORTS = sorted((REPO / "fixtures" / "scenarios").glob("*/*/nsys.sqlite.gz"))

needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"real traces not found at {TRACES} (the shared/ folder)"
)

# file: (K kernels, R runtime rows, N NVTX ranges, MC, MS, SY, nsys version, schema version)
EXPECTED = {
    "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite": (5, 95, 22, 15, 0, 0, "2022.2.1.31", "2.9.1"),
    "pipit/perlmutter-cloverleaf-cuda.sqlite": (1312, 3048, 0, 279, 0, 1312, "2024.5.1.113",
                                                "3.13.2"),
    "nvfuser/8fa9ec2/report1.sqlite": (19, 967, 639, 1, 1, 1, "2024.6.2.25", "3.16.1"),
    "nvfuser/64ee035/report1.sqlite": (19, 968, 652, 1, 1, 1, "2024.6.2.25", "3.16.1"),
    "nvfuser/ee4fcf3/report1.sqlite": (18, 990, 13513, 3, 3, 3, "2025.1.1.110", "3.17.1"),
    "weatherbench2/report1.sqlite": (0, 23, 0, 0, 1, 0, "2025.5.1.121", "3.23.3"),
    "nsys-ai/mock.sqlite": (2, 9, 0, 1, 0, 1, "2026.1.1.204", "3.24.14"),
    "nsys-ai/h100_2gpu_1s.sqlite": (3442, 5796, 16782, 904, 22, 244, "2026.2.1.210", "3.25.0"),
    "nsys-ai/mfu_2gpu_before.sqlite": (4010, 7466, 19118, 1020, 269, 366, "2026.2.1.210",
                                       "3.25.0"),
    "nsys-ai/mfu_2gpu_after.sqlite": (3587, 6682, 17113, 904, 242, 334, "2026.2.1.210", "3.25.0"),
}
SAXPY_BACKTRACE_DUPLICATES = 38  # eventClass 67 rows repeating an eventClass 0 call


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def writable_copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / Path(name).name
    shutil.copyfile(TRACES / name, dst)
    dst.chmod(0o644)
    return dst


@needs_traces
def test_every_shared_export_is_covered_here():
    found = {p.relative_to(TRACES).as_posix() for p in TRACES.rglob("*.sqlite")}
    assert found == set(EXPECTED)


@needs_traces
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_export_loads_with_its_row_counts(name):
    k, r, n, mc, ms, sy, tool, schema = EXPECTED[name]
    graph = load_trace(TRACES / name)
    info = graph.info
    assert (info.format, info.tool_version, info.schema_version) == ("nsys-sqlite", tool, schema)
    if name.startswith("pipit/saxpy"):
        r -= SAXPY_BACKTRACE_DUPLICATES
    assert info.totals["kernels"] == k
    assert info.totals["api_calls"] == r
    assert info.totals["nvtx_ranges"] == n
    assert (info.totals["memcpys"], info.totals["memsets"], info.totals["syncs"]) == (mc, ms, sy)
    # Small traces without step ranges are loaded whole: the detail matches the totals.
    by_kind = Counter(op.kind for op in graph.gpu_ops)
    assert by_kind[GpuOpKind.KERNEL] == k
    assert (by_kind[GpuOpKind.MEMCPY], by_kind[GpuOpKind.MEMSET]) == (mc, ms)
    assert len(graph.api_calls) == r
    assert len(graph.syncs) == sy
    assert len(graph.ranges) == n
    assert info.window_ns is not None and info.window_ns[0] < info.window_ns[1]


@needs_traces
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_api_names_lose_cupti_version_suffix(name):
    graph = load_trace(TRACES / name)
    assert graph.api_calls
    assert not [a.name for a in graph.api_calls if a.name.endswith(("_v3020", "_v7000"))]


@needs_traces
@pytest.mark.parametrize(
    ("name", "matched"),
    [("nsys-ai/mfu_2gpu_before.sqlite", 3986), ("nsys-ai/mfu_2gpu_after.sqlite", 3577),
     ("nsys-ai/h100_2gpu_1s.sqlite", 3442 - 1810)],
)
def test_kernels_match_launches_within_their_process(name, matched):
    graph = load_trace(TRACES / name)
    kernels = list(graph.kernels())
    launched = [op for op in kernels if graph.launcher(op) is not None]
    assert len(launched) == matched
    assert all(graph.launcher(op).pid == op.pid for op in launched)


@needs_traces
def test_correlation_ids_repeated_across_processes_do_not_cross():
    graph = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite")
    pids_by_corr: dict[int, set[int]] = {}
    for call in graph.api_calls:
        pids_by_corr.setdefault(call.correlation, set()).add(call.pid)
    shared = {c for c, pids in pids_by_corr.items() if len(pids) > 1}
    assert len(shared) >= 78  # SOURCES.md: 78 ids shared in this file
    crossing = [op for op in graph.gpu_ops if op.correlation in shared]
    assert crossing
    for op in crossing:
        call = graph.launcher(op)
        assert call is None or call.pid == op.pid


@needs_traces
def test_backtrace_duplicates_of_api_calls_are_dropped():
    graph = load_trace(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    keys = [(a.pid, a.correlation) for a in graph.api_calls]
    assert len(keys) == len(set(keys)) == 95 - SAXPY_BACKTRACE_DUPLICATES
    launches = [a for a in graph.api_calls if a.name == "cudaLaunchKernel"]
    assert len(launches) == 5
    assert all(len(graph.launched(a)) == 1 for a in launches)


@needs_traces
def test_nvtx_domains_and_string_ids_are_resolved():
    graph = load_trace(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    names = Counter((r.domain, r.name) for r in graph.ranges)
    assert names[("", "saxpy")] >= 1  # inline text, default domain
    assert {n for d, n in names if d == "MPI"} >= {"MPI_Init", "MPI_Send", "MPI_Recv"}  # textId
    assert all(r.end_ns >= r.start_ns for r in graph.ranges)


@needs_traces
def test_driver_calls_are_tagged_driver():
    graph = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite")
    layers = Counter(a.layer for a in graph.api_calls)
    assert layers[ApiLayer.DRIVER] == 1074
    assert all(a.name.startswith("cu") and not a.name.startswith("cuda")
               for a in graph.api_calls if a.layer is ApiLayer.DRIVER)


@needs_traces
def test_copies_carry_direction_and_host_memory():
    graph = load_trace(TRACES / "pipit/perlmutter-cloverleaf-cuda.sqlite")
    copies = Counter((op.copy_kind, op.host_memory, op.name) for op in graph.gpu_ops
                     if op.kind is GpuOpKind.MEMCPY)
    assert copies == {("HtoD", "pageable", "Memcpy HtoD"): 254,
                      ("DtoH", "pageable", "Memcpy DtoH"): 25}
    assert all(op.bytes > 0 for op in graph.gpu_ops if op.kind is GpuOpKind.MEMCPY)
    pinned = load_trace(TRACES / "nsys-ai/h100_2gpu_1s.sqlite")
    kinds = Counter((op.copy_kind, op.host_memory) for op in pinned.gpu_ops
                    if op.kind is GpuOpKind.MEMCPY)
    assert kinds[("HtoD", "pinned")] == 446 and kinds[("DtoD", "")] == 450


@needs_traces
def test_kernels_carry_launch_geometry():
    graph = load_trace(TRACES / "nvfuser/8fa9ec2/report1.sqlite")
    kernels = list(graph.kernels())
    assert all(k.grid and k.block and min(k.grid + k.block) >= 1 for k in kernels)
    assert any("nvfuser_none_f0_c0_r0_g0" in k.name for k in kernels)


@needs_traces
def test_sync_kind_follows_the_correlated_call():
    # cloverleaf stores syncType 1 ("Event sync") for its cudaDeviceSynchronize calls.
    graph = load_trace(TRACES / "pipit/perlmutter-cloverleaf-cuda.sqlite")
    assert Counter(s.kind for s in graph.syncs) == {SyncKind.DEVICE: 1312}
    assert all(s.tid is not None for s in graph.syncs)
    mfu = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite")
    assert Counter(s.kind for s in mfu.syncs) == {
        SyncKind.STREAM_WAIT_EVENT: 200, SyncKind.EVENT: 133, SyncKind.STREAM: 33}


@needs_traces
def test_gpus_are_keyed_by_the_cuda_device_kernels_use():
    # cloverleaf: kernel deviceId 0 is cuDevice 0, which is TARGET_INFO_GPU.id 3.
    graph = load_trace(TRACES / "pipit/perlmutter-cloverleaf-cuda.sqlite")
    assert [g.device for g in graph.info.gpus] == [0, 1, 2, 3]
    assert {op.device for op in graph.gpu_ops} == {0}
    h100 = load_trace(TRACES / "nvfuser/8fa9ec2/report1.sqlite").info.gpus[0]
    assert (h100.name, h100.sm_count, h100.compute_capability) == (
        "NVIDIA H100 80GB HBM3", 132, "9.0")
    assert h100.memory_bytes and h100.memory_bytes > 80 * 10**9


@needs_traces
def test_missing_gpu_table_is_said_plainly():
    graph = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite")
    assert graph.info.gpus == []
    assert any("TARGET_INFO_GPU" in n for n in graph.info.notes)


@needs_traces
def test_processes_threads_and_software_are_described():
    graph = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite")
    info = graph.info
    assert set(info.processes) == {144, 145}
    assert {pid for pid, _ in info.threads} <= {144, 145}
    assert all((a.pid, a.tid) in info.threads for a in graph.api_calls)
    assert info.software["cuda_driver"] == "13.0"
    saxpy = load_trace(TRACES / "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite").info
    assert saxpy.software["nvidia_driver"] == "525.105.17"


@needs_traces
def test_export_without_kernels_says_there_is_no_gpu_work():
    graph = load_trace(TRACES / "weatherbench2/report1.sqlite")
    assert not list(graph.kernels())
    assert graph.steps == []
    assert any("no GPU work" in n for n in graph.info.notes)


@needs_traces
def test_traces_without_step_ranges_fall_back_to_the_launch_pattern():
    graph = load_trace(TRACES / "pipit/perlmutter-cloverleaf-cuda.sqlite")
    assert len(graph.steps) >= 3
    assert graph.info.totals["steps"] == len(graph.steps)
    assert any("launch sequence" in n for n in graph.info.notes)


@needs_traces
def test_gpu_op_cap_loads_a_window_but_keeps_whole_trace_totals():
    cap = 1000
    graph = load_trace(TRACES / "nsys-ai/mfu_2gpu_before.sqlite", LoadOptions(max_gpu_ops=cap))
    assert 0 < len(graph.gpu_ops) <= cap
    assert graph.info.totals["kernels"] == 4010
    lo, hi = graph.info.window_ns
    assert hi - lo < 300_000_000  # narrower than the 300 ms the file spans
    assert len(graph.api_calls) < 7466
    assert any(op.start_ns < hi and op.end_ns > lo for op in graph.gpu_ops)


@needs_traces
def test_gzipped_export_loads_like_the_plain_one(tmp_path):
    plain = TRACES / "nsys-ai/mfu_2gpu_after.sqlite"
    packed = tmp_path / "nsys.sqlite.gz"
    with plain.open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    graph = load_trace(packed)
    assert graph.info.totals == load_trace(plain).info.totals
    assert graph.info.path == str(packed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nsys.sqlite.gz"]


@needs_traces
@pytest.mark.parametrize("keep", [50, 40_960, 1_000_000, 2_686_976 - 4096])
def test_truncated_export_is_a_format_error(tmp_path, keep):
    path = writable_copy("nsys-ai/mfu_2gpu_before.sqlite", tmp_path)
    with path.open("r+b") as f:
        f.truncate(keep)
    with pytest.raises(TraceFormatError, match="truncated or corrupt SQLite file"):
        load_trace(path)


@needs_traces
def test_corrupt_page_is_a_format_error(tmp_path):
    path = writable_copy("nsys-ai/mfu_2gpu_before.sqlite", tmp_path)
    with path.open("r+b") as f:
        f.seek(1_000_000)
        f.write(b"\xa5" * 8192)
    with pytest.raises(TraceFormatError, match="truncated or corrupt SQLite file"):
        load_trace(path)


@needs_traces
def test_truncated_gzip_is_a_format_error(tmp_path):
    packed = tmp_path / "nsys.sqlite.gz"
    whole = gzip.compress((TRACES / "nsys-ai/mock.sqlite").read_bytes())
    packed.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceFormatError, match="truncated or corrupt gzip file"):
        load_trace(packed)


def test_sqlite_that_is_not_an_nsys_export_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE kernels (name TEXT, start INTEGER, end INTEGER)")
        conn.execute("INSERT INTO kernels VALUES ('gemm', 0, 10)")
    conn.close()
    with pytest.raises(TraceFormatError, match="SQLite, but not an Nsight Systems export"):
        load_trace(path)


@needs_traces
def test_missing_required_column_is_named(tmp_path):
    path = writable_copy("nvfuser/64ee035/report1.sqlite", tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN correlationId")
    conn.close()
    with pytest.raises(TraceFormatError, match=r"CUPTI_ACTIVITY_KIND_KERNEL\.correlationId"):
        load_trace(path)


@needs_traces
def test_table_variant_is_resolved(tmp_path):
    path = writable_copy("nsys-ai/mock.sqlite", tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO CUPTI_ACTIVITY_KIND_KERNEL_V2")
    conn.close()
    graph = load_trace(path)
    assert graph.info.totals["kernels"] == 2 and len(list(graph.kernels())) == 2


@needs_traces
@pytest.mark.parametrize("name", ["nsys-ai/mfu_2gpu_before.sqlite",
                                  "pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"])
def test_input_file_is_left_unchanged(tmp_path, name):
    path = writable_copy(name, tmp_path)
    before, mtime = sha256(path), path.stat().st_mtime_ns
    load_trace(path)
    load_trace(path, LoadOptions(max_steps=2, max_gpu_ops=100))
    assert sha256(path) == before
    assert path.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no journal, WAL or cache files


# ----- our H100 captures (nsys 2025.3, NVTX "step N" ranges), once fixtures/scenarios exists ----

needs_scenarios = pytest.mark.skipif(
    not SCENARIO_EXPORTS, reason="no fixtures/scenarios/*/*/nsys.sqlite.gz captured yet"
)


@needs_scenarios
@pytest.mark.parametrize("path", SCENARIO_EXPORTS, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_scenario_capture_has_steps_in_a_bounded_window(path):
    max_steps = 5
    graph = load_trace(path, LoadOptions(max_steps=max_steps))
    info = graph.info
    assert info.totals["steps"] >= len(graph.steps) > 0
    assert len(graph.steady_steps) <= max_steps
    assert graph.steady_steps
    lo, hi = info.window_ns
    for step in graph.steps:
        assert lo <= step.cpu_start_ns < step.cpu_end_ns <= hi
        assert graph.step_ops(step), f"{step.name} launched nothing"
    assert len(list(graph.kernels())) <= info.totals["kernels"] + info.totals["graphs"]


@needs_scenarios
@pytest.mark.parametrize("path", SCENARIO_EXPORTS, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_scenario_capture_graph_replays_are_linked_to_their_launch(path):
    graph = load_trace(path)
    replays = [op for op in graph.gpu_ops if op.graph_id is not None]
    for op in replays:
        call = graph.launcher(op)
        assert call is None or call.name in {"cudaGraphLaunch", "cuGraphLaunch"}
    assert all(op.kind is not GpuOpKind.GRAPH or op.graph_id is not None for op in graph.gpu_ops)
