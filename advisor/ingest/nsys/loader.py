"""Nsight Systems SQLite exports (``nsys export --type sqlite``) -> `OpGraph`.

Reading happens in two passes so memory follows the analysis window, not the trace:

1. Whole-trace facts in SQL: row counts (`TraceInfo.totals`), the step-like NVTX ranges
   (prefiltered with LIKE, then `advisor.graph.steps`), NVTX domain names.
2. Detailed rows for the window chosen from them (`advisor.ingest.nsys.window`): API calls by
   time, GPU ops and sync records launched by those calls (by ``(pid, correlationId)`` range) or
   running during the window, NVTX ranges overlapping it.

Each pass is one sequential scan per table with range predicates: nsys exports have no indexes,
so joins between activity tables would be quadratic; matching happens in Python with dicts.
Version differences (table variants, enums, string ids) live in `advisor.ingest.nsys.schema`.

Event ids are the rows' SQLite rowids (GPU ops: ``rowid * 4 + table``), so evidence cited by a
finding can be looked up in the export.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from pathlib import Path

from advisor.errors import TraceFormatError
from advisor.gc_pause import gc_paused
from advisor.graph.api_names import normalize
from advisor.graph.build import build_graph
from advisor.graph.gemm_shapes import SHAPE_PROBE_RANGE, sizes_by_signature
from advisor.graph.model import (
    ApiCall,
    ApiLayer,
    CpuRange,
    GpuInfo,
    GpuOp,
    GpuOpKind,
    OpGraph,
    RangeSource,
    Step,
    SyncKind,
    SyncWait,
    TraceInfo,
)
from advisor.graph.op_names import EVALUATE_FUNCTION, nvtx_operator
from advisor.graph.step_pattern import StepPattern, compile_step_pattern
from advisor.graph.steps import matches_step, steps_from_ranges
from advisor.ingest.base import EventFilter, LoadOptions, TraceSource
from advisor.ingest.nsys import schema as S
from advisor.ingest.nsys.export_file import (
    MAX_VALUE_BYTES,
    connect_read_only,
    gzipped_sqlite,
    is_gzip,
    materialized,
)
from advisor.ingest.nsys.window import Window, op_window, step_window

FORMAT = "nsys-sqlite"
STEP_LIKE = ("%step%", "%iter%")  # every name `is_step_name` accepts contains one of these

_OP_TABLE_CODE = {S.KERNEL.base: 0, S.MEMCPY.base: 1, S.MEMSET.base: 2, S.GRAPH_TRACE.base: 3}

# The API a sync record correlates with says what the host waited for more reliably than
# syncType, whose numbering differs between exports (cudaStreamSynchronize is 2 in nsys 2024.6
# and 2025.3 but 3 in 2026.2; cloverleaf's cudaDeviceSynchronize is 1, "Event sync").
_SYNC_KIND_BY_API = {
    "cudaDeviceSynchronize": SyncKind.DEVICE, "cudaThreadSynchronize": SyncKind.DEVICE,
    "cuCtxSynchronize": SyncKind.DEVICE, "cudaStreamSynchronize": SyncKind.STREAM,
    "cuStreamSynchronize": SyncKind.STREAM, "cudaEventSynchronize": SyncKind.EVENT,
    "cuEventSynchronize": SyncKind.EVENT, "cudaEventQuery": SyncKind.EVENT,
    "cuEventQuery": SyncKind.EVENT, "cudaStreamWaitEvent": SyncKind.STREAM_WAIT_EVENT,
    "cuStreamWaitEvent": SyncKind.STREAM_WAIT_EVENT,
}


class NsysSqliteSource(TraceSource):
    """Nsight Systems SQLite exports, plain, gzipped or xz-compressed, schema 2.9 to 3.25."""

    format = FORMAT

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if head.startswith(S.SQLITE_MAGIC):
            return True
        return is_gzip(head) and gzipped_sqlite(path)

    def load(self, path: Path, options: LoadOptions) -> OpGraph:
        with materialized(path, options.unpack_limits) as plain, gc_paused():
            conn = connect_read_only(plain, shown=path)
            try:
                return _Loader(conn, path, options).load()
            except sqlite3.DatabaseError as e:
                if _is_corruption(e):
                    raise TraceFormatError(f"{path}: truncated or corrupt SQLite file") from e
                refused = _refused_by_schema(e)
                if refused:
                    raise TraceFormatError(f"{path}: SQLite cannot read this export "
                                           f"({refused}): not a file nsys wrote") from e
                raise
            finally:
                conn.close()


def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    """SQLite's corruption errors, as opposed to a bad query (a bug here, not in the file)."""
    text = str(e).lower()
    return type(e) is sqlite3.DatabaseError or any(
        w in text for w in ("malformed", "not a database", "corrupt", "disk i/o")
    )


# What a file's own schema can make SQLite refuse in our fixed queries: a collation or
# function only the writer had (``COLLATE``, a generated column), a virtual table's module,
# a value over `export_file.MAX_VALUE_BYTES`. Any other failing query is a bug here.
_SCHEMA_REFUSALS = {
    "no such collation sequence": "a collation sequence SQLite does not have",
    "no such function": "a function SQLite does not have",
    "no such module": "a virtual table of a module SQLite does not have",
    "unsafe use of": "a function its schema may not use",
    "string or blob too big": f"a value over {MAX_VALUE_BYTES >> 20} MiB",
}


def _refused_by_schema(e: sqlite3.DatabaseError) -> str | None:
    """Why SQLite refused a query because of the file's schema, or None (then a bug here)."""
    text = str(e).lower()
    return next((why for cause, why in _SCHEMA_REFUSALS.items() if cause in text), None)


class _Loader:
    """One load of one export: whole-trace pass, window choice, detailed pass, graph."""

    def __init__(self, conn: sqlite3.Connection, path: Path, options: LoadOptions) -> None:
        self.conn = conn
        self.path = path
        self.options = options
        self.schema = S.NsysSchema(conn, path)
        self.strings = S.StringCache(conn)
        self.info = TraceInfo(
            path=str(path), format=FORMAT, schema_version=self.schema.schema_version,
            tool_version=self.schema.tool_version,
        )
        self.range_types = self.schema.event_type_ids(*S.NVTX_RANGE_TYPES)
        self.domain_create_types = self.schema.event_type_ids("NvtxDomainCreate")
        self.domains: dict[int, str] = {}
        self.global_pids: dict[int, int] = {}  # pid -> globalPid, to match GPU rows by value
        self.probes: list[CpuRange] = []  # shape-probe ranges (`advisor profile --nsys`)
        # `LoadOptions.events`, once the steps are found from named ranges (`load`)
        self.events: EventFilter | None = None

    def load(self) -> OpGraph:
        self.info.totals = self._totals()
        pattern = compile_step_pattern(self.options.step_pattern)
        all_steps = steps_from_ranges(self._step_candidates(pattern), pattern, self.options.pid)
        self.info.totals["steps"] = len(all_steps)
        window = self._window(all_steps)
        # A reader of part of the trace (`LoadOptions.events`) gets only the calls and ranges
        # it keeps, selected in SQL; not where the steps are inferred from the launch pattern,
        # whose check compares all host ranges of each repeat.
        self.events = self.options.events if all_steps else None
        calls = self._api_calls(window)
        device_filter = self._device_where(window, calls)
        ops = self._gpu_ops(window, device_filter)
        syncs = self._syncs(device_filter, calls)
        ranges = self._ranges(window)
        self._describe(window, calls, ops, ranges)
        graph = build_graph(self.info, ranges, calls, ops, syncs, window.steps,
                            self.options.step_pattern, self.options.pid)
        if not all_steps:
            self.info.totals["steps"] = len(graph.steps)
        graph.probe_gemm_sizes = self._probe_gemm_sizes(graph.steps)
        return graph

    def _probe_gemm_sizes(self, steps: list[Step]) -> dict:
        """GEMM sizes per kernel signature from the shape-probe step `advisor profile --nsys`
        records before its window (`advisor.graph.gemm_shapes`): that step alone is read, into
        a graph of its own, so its operator ranges never reach the analysed steps."""
        probes = self.probes  # found by the whole-trace scan of step-like ranges
        if not probes:
            return {}
        # the analysed process's probe (one a process), else the first
        pid = self.options.pid if self.options.pid is not None else (
            steps[0].pid if steps else None)
        own = [r for r in probes if r.pid == pid] or probes
        probe = min(own, key=lambda r: r.start_ns)
        w = Window(probe.start_ns, probe.end_ns, [], "shape probe")
        calls = [c for c in self._api_calls(w) if c.pid == probe.pid]
        ops = self._gpu_ops(w, self._device_where(w, calls))
        ranges = [r for r in self._ranges(w) if r.pid == probe.pid]
        info = TraceInfo(path=self.info.path, format=FORMAT)
        return sizes_by_signature(OpGraph(info, ranges, calls, ops, [], []))

    # ----- SQL helpers --------------------------------------------------------------------

    def _scan(self, spec: S.TableSpec, where: str = "", params: Iterable[object] = (),
              limit: int | None = None) -> Iterator[tuple]:
        """Rows ``(rowid, *spec.columns)`` of a table, lazily; nothing if it has no rows."""
        selected = self.schema.select(spec)
        if selected is None:
            return iter(())
        table, cols = selected
        name = self.schema.table(spec.base) or table
        sql = f"SELECT {self.schema.rowid(name)}, {cols} FROM {table} {where}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return S.checked_rows(self.conn.execute(sql, tuple(params)), spec, name, self.path,
                              self.schema.columns(name))

    def _count(self, spec: S.TableSpec, where: str = "", params: Iterable[object] = ()) -> int:
        selected = self.schema.select(spec)
        if selected is None:
            return 0
        return int(self.conn.execute(f"SELECT count(*) FROM {selected[0]} {where}",
                                     tuple(params)).fetchone()[0])

    @staticmethod
    def _in(ids: Iterable[int]) -> str:
        return "(" + ",".join(str(int(i)) for i in ids) + ")" if ids else "(NULL)"

    # ----- pass 1: whole-trace facts -------------------------------------------------------

    def _totals(self) -> dict[str, int]:
        """Row counts of the whole trace, so reports stay right when only a window is loaded."""
        backtrace = self.schema.event_class_ids()["backtrace"]
        api = self._count(S.RUNTIME)
        if (backtrace is not None and self.schema.has_column(S.RUNTIME.base, "eventClass")
                and self._may_hold_backtraces()):
            # With CUDA backtraces on, each call is also stored once more as eventClass 67.
            api = self._count(S.RUNTIME, "WHERE eventClass IS NOT ?", (backtrace,)) or api
        return {
            "kernels": self._count(S.KERNEL),
            "api_calls": api,
            "nvtx_ranges": self._count(S.NVTX, f"WHERE eventType IN {self._in(self.range_types)}"),
            "memcpys": self._count(S.MEMCPY),
            "memsets": self._count(S.MEMSET),
            "syncs": self._count(S.SYNC),
            "graphs": self._count(S.GRAPH_TRACE),
        }

    def _may_hold_backtraces(self) -> bool:
        """Whether RUNTIME may hold backtrace rows. A backtrace row exists for its call chain
        (``callchainId`` REFERENCES ``CUDA_CALLCHAINS``): with that column and no chain
        stored, there is none, and the plain ``count(*)`` (SQLite counts a table without
        decoding its rows) is exact; the filtered count is a full scan, 0.6 s on 11M calls."""
        if not self.schema.has_column(S.RUNTIME.base, "callchainId"):
            return True  # an export that does not say: count them
        return self.schema.table("CUDA_CALLCHAINS") is not None

    def _step_candidates(self, pattern: StepPattern | None = None) -> list[CpuRange]:
        """Step-like NVTX ranges of the whole trace (and, in the same scan, domain names);
        with ``pattern`` (``--steps``), the ranges it finds instead."""
        name_tests: list[str] = []
        params: list[object] = []
        if pattern is not None:
            # SQLite has no regular expressions of its own: a Python function does the test.
            self.conn.create_function("advisor_steps", 1,
                                      lambda v: v is not None and bool(pattern.search(v)),
                                      deterministic=True)
            tests, likes = ["advisor_steps(text)"], "advisor_steps(value)"
            one = []
        else:
            tests, likes = ["text LIKE ?"] * len(STEP_LIKE), " OR ".join(
                "value LIKE ?" for _ in STEP_LIKE)
            one = list(STEP_LIKE)
        # the shape probe's range (`advisor.graph.gemm_shapes`) comes in the same scan
        if self.schema.has_column(S.NVTX.base, "text"):
            name_tests += [*tests, "text = ?"]
            params += [*one, SHAPE_PROBE_RANGE]
        if self.schema.has_column(S.NVTX.base, "textId"):
            name_tests.append(f"textId IN (SELECT id FROM StringIds WHERE {likes} OR value = ?)")
            params += [*one, SHAPE_PROBE_RANGE]
        name_test = " OR ".join(name_tests) or "0"
        where = (f"WHERE (eventType IN {self._in(self.range_types)} AND end IS NOT NULL "
                 f"AND globalTid IS NOT NULL AND ({name_test})) "
                 f"OR eventType IN {self._in(self.domain_create_types)}")
        candidates = []
        for row in self._scan(S.NVTX, where, params):
            if row[3] in self.domain_create_types:
                self.domains[row[7] or 0] = self._nvtx_name(row)
                continue
            candidates.append(row)
        ranges = [self._range(row) for row in candidates]
        self.probes = [r for r in ranges if r.name == SHAPE_PROBE_RANGE]
        return [r for r in ranges if r.name != SHAPE_PROBE_RANGE and matches_step(r.name, pattern)]

    def _window(self, steps: list) -> Window:
        if steps:
            return step_window(steps, self.options.max_steps)
        totals = self.info.totals
        total_ops = totals["kernels"] + totals["memcpys"] + totals["memsets"] + totals["graphs"]
        span = None
        if total_ops > self.options.max_gpu_ops:
            span = self._gpu_span()
        return op_window(total_ops, self.options.max_gpu_ops, span)

    def _gpu_span(self) -> tuple[int, int] | None:
        selected = self.schema.select(S.KERNEL) or self.schema.select(S.MEMCPY)
        if selected is None:
            return None
        lo, hi = self.conn.execute(f"SELECT min(start), max(end) FROM {selected[0]}").fetchone()
        return None if lo is None else (int(lo), int(hi))

    # ----- pass 2: the window in detail ---------------------------------------------------

    @staticmethod
    def _time_where(w: Window) -> tuple[str, list[int]]:
        if w.whole:
            return "", []
        return "WHERE start < ? AND end > ?", [w.end_ns, w.start_ns]

    def _api_calls(self, w: Window) -> list[ApiCall]:
        """Runtime and driver calls overlapping the window, backtrace duplicates dropped.

        The per-row work is a few dict hits: a window repeats a few hundred call names and a
        few threads, so name, layer and the thread's ids are decoded once each."""
        classes = self.schema.event_class_ids()
        backtrace, driver = classes["backtrace"], classes["driver"]
        where, params = self._time_where(w)
        if self.events is not None:
            kept, kept_params = self._kept_calls(self.events, w)
            where = f"{where} AND {kept}" if where else f"WHERE {kept}"
            params = [*params, *kept_params]
        calls: list[ApiCall] = []
        append = calls.append
        backtraces: dict[tuple[int, int], ApiCall] = {}
        kinds: dict[tuple[object, object], tuple[str, ApiLayer]] = {}
        threads: dict[int, tuple[int, int]] = {}
        for rowid, start, end, gtid, corr, name_id, ev_class in self._scan(S.RUNTIME, where, params):
            kind = kinds.get((name_id, ev_class))
            if kind is None:
                name = normalize(self.strings.get(name_id))
                kind = kinds[(name_id, ev_class)] = (name, _layer(ev_class, name, driver))
            thread = threads.get(gtid)
            if thread is None:
                thread = threads[gtid] = (S.pid_of(gtid), S.tid_of(gtid))
                self.global_pids.setdefault(thread[0], S.global_pid_of(gtid))
            pid = thread[0]
            call = ApiCall(rowid, kind[0], start, end, pid, thread[1], corr, kind[1])
            if ev_class is not None and ev_class == backtrace:
                backtraces.setdefault((pid, corr), call)
                continue
            append(call)
        if backtraces:  # a call kept only as its backtrace copy (the calls' keys: made only here)
            seen = {(c.pid, c.correlation) for c in calls}
            calls.extend(c for key, c in backtraces.items() if key not in seen)
        return calls

    def _kept_calls(self, events: EventFilter, w: Window) -> tuple[str, list[int]]:
        """The SQL test of the calls ``events`` keeps: by name, by length, or because a GPU op
        running after the window opened correlates with it (a launch under a name the filter
        does not know). The names are judged from ``StringIds`` (every CUDA API name starts
        with "cu"; a few hundred strings, where reading the calls' distinct names would scan
        the whole RUNTIME table); a name that is not a string id is kept. Correlation ids are
        per process and the test ignores the process: it may keep a few calls more, never
        fewer."""
        if self.schema.select(S.RUNTIME) is None:
            return "1", []  # no calls to keep or leave
        kept = [i for i, name in self.conn.execute(
                    "SELECT id, value FROM StringIds WHERE value LIKE 'cu%'")
                if isinstance(i, int) and isinstance(name, str)
                and events.keeps_call(normalize(name))]
        tests = [f"nameId IN {self._in(kept)}", "typeof(nameId) != 'integer'", "end - start > ?"]
        params = [int(events.long_call_ns)]
        launched = []
        for spec in S.GPU_OP_SPECS:
            selected = self.schema.select(spec)
            if selected is not None:
                launched.append(f"SELECT correlationId FROM {selected[0]}"
                                + ("" if w.whole else " WHERE end > ?"))
                params += [] if w.whole else [w.start_ns]
        if launched:
            tests.append(f"correlationId IN ({' UNION '.join(launched)})")
        return "(" + " OR ".join(tests) + ")", params

    def _device_where(self, w: Window, calls: list[ApiCall]) -> tuple[str, list[int]]:
        """Rows running in the window, or launched by its calls (one correlation range a process)."""
        if w.whole:
            return "", []
        ids: dict[int, list[int]] = {}  # per process its calls' correlation ids, then min/max
        for c in calls:  # min and max in C: a running min and max per call took 3x as long
            if c.correlation is not None:
                found = ids.get(c.pid)
                if found is None:
                    found = ids[c.pid] = []
                found.append(c.correlation)
        clauses, params = ["(start < ? AND end > ?)"], [w.end_ns, w.start_ns]
        for pid, (lo, hi) in sorted((p, (min(v), max(v))) for p, v in ids.items()):
            clauses.append("(globalPid = ? AND correlationId BETWEEN ? AND ?)")
            params += [self.global_pids[pid], lo, hi]
        return "WHERE " + " OR ".join(clauses), params

    def _gpu_ops(self, w: Window, device_filter: tuple[str, list[int]]) -> list[GpuOp]:
        where, params = device_filter
        budget = None if w.steps is not None else self.options.max_gpu_ops
        copy_kinds = self.schema.copy_kinds()
        host_kinds = self.schema.host_memory_kinds()
        ops: list[GpuOp] = []
        for spec in S.GPU_OP_SPECS:
            code = _OP_TABLE_CODE[spec.base]
            limit = None if budget is None else budget - len(ops) + 1
            for row in self._scan(spec, where, params, limit):
                if spec is S.KERNEL:
                    ops.append(self._kernel(row, code))
                elif spec is S.MEMCPY:
                    ops.append(_memcpy(row, code, copy_kinds, host_kinds))
                elif spec is S.MEMSET:
                    ops.append(_memset(row, code))
                else:
                    ops.append(_graph(row, code))
            if budget is not None and len(ops) > budget:
                del ops[budget:]
                self.info.notes.append(f"GPU ops capped at {budget} (LoadOptions.max_gpu_ops)")
                break
        return ops

    def _kernel(self, row: tuple, code: int) -> GpuOp:
        (rowid, start, end, device, stream, corr, gpid, demangled, short,
         gx, gy, gz, bx, by, bz, node_id, graph_id) = row
        if graph_id is None and node_id is not None:
            graph_id = node_id >> 32  # per-node graph tracing packs the graph id in the node id
        return GpuOp(
            rowid * 4 + code, GpuOpKind.KERNEL,
            self.strings.get(demangled) or self.strings.get(short), start, end, device, stream,
            S.pid_of(gpid), corr, graph_id=graph_id,
            grid=(gx, gy, gz) if gx is not None else None,
            block=(bx, by, bz) if bx is not None else None,
        )

    def _syncs(self, device_filter: tuple[str, list[int]], calls: list[ApiCall]) -> list[SyncWait]:
        """Sync records; their kind and thread come from the correlated call when it is loaded."""
        where, params = device_filter
        by_key = {(c.pid, c.correlation): c for c in calls}
        kinds = self.schema.sync_kinds()
        out = []
        for rowid, start, end, gpid, corr, sync_type, device, stream in self._scan(
            S.SYNC, where, params
        ):
            pid = S.pid_of(gpid)
            call = by_key.get((pid, corr))
            kind = SyncKind(kinds.get(sync_type, "other"))
            if call is not None:
                kind = _SYNC_KIND_BY_API.get(call.name, kind)
            out.append(SyncWait(rowid, kind, start, end, pid, call.tid if call else None, corr,
                                device, stream))
        return out

    def _ranges(self, w: Window) -> list[CpuRange]:
        where = (f"WHERE eventType IN {self._in(self.range_types)} AND end IS NOT NULL "
                 "AND globalTid IS NOT NULL")
        params: list[int] = []
        if not w.whole:
            where += " AND start < ? AND end > ?"
            params = [w.end_ns, w.start_ns]
        ranges = [self._range(row) for row in self._scan(S.NVTX, where, params)]
        _number_backward_nodes(ranges)
        if self.events is not None:
            keeps, judged = self.events.keeps_range, {}
            ranges = [r for r in ranges if judged.setdefault(r.name, keeps(r.name))]
        return ranges

    def _nvtx_name(self, row: tuple) -> str:
        text, text_id = row[5], row[6]
        return S.as_text(text) if text is not None else self.strings.get(text_id)

    def _range(self, row: tuple) -> CpuRange:
        rowid, start, end, _type, gtid, text, text_id, domain_id, _end_tid = row
        name = S.as_text(text) if text is not None else self.strings.get(text_id)
        domain = self.domains.get(domain_id, f"domain {domain_id}") if domain_id else ""
        pid, tid = S.pid_of(gtid), S.tid_of(gtid)
        # PyTorch writes its operator ranges (`--pytorch=autograd-nvtx`, emit_nvtx) into the
        # default domain; libraries name theirs in their own (CUB's "cub::DeviceRadixSort" in
        # "CCCL"), and those are not operators
        op = nvtx_operator(name) if not domain_id and ("::" in name or "=" in name) else None
        if op is None:
            return CpuRange(rowid, name, start, end, pid, tid, RangeSource.NVTX, domain)
        source = RangeSource.OPERATOR if op.operator else RangeSource.NVTX
        rng = CpuRange(rowid, op.name, start, end, pid, tid, source, domain, shapes=op.shapes)
        if op.sequence >= 0:
            # Kineto's convention (`CpuRange.fwd_thread`): 0 on forward ops, nonzero on the
            # backward nodes; nsys does not say which thread ran the forward op
            rng.sequence, rng.fwd_thread = op.sequence, 1 if op.backward else 0
        return rng

    # ----- trace description ----------------------------------------------------------------

    def _describe(self, w: Window, calls: list[ApiCall], ops: list[GpuOp],
                  ranges: list[CpuRange]) -> None:
        pids = {c.pid for c in calls} | {o.pid for o in ops} | {r.pid for r in ranges}
        self.info.gpus = self._gpus()
        self.info.processes = self._processes(pids)
        self.info.threads = self._threads(pids)
        self.info.software = self._software()
        self.info.window_ns = _window_span(w, calls, ops, ranges)
        self._notes(w, calls, ops)

    def _gpus(self) -> list[GpuInfo]:
        """GPUs by the CUDA device ordinal kernels use (``cuDevice``), not TARGET_INFO_GPU.id."""
        cuda_ids = {gpu: cuda for _, gpu, cuda in self._scan(S.CUDA_DEVICE)}
        gpus = []
        for _, gid, name, cu_device, sms, memory, major, minor in self._scan(S.GPU_INFO):
            device = cu_device if cu_device is not None else cuda_ids.get(gid, gid)
            cc = f"{major}.{minor}" if major is not None and minor is not None else None
            gpus.append(GpuInfo(int(device), str(name or ""), sms, memory, cc))
        return sorted(gpus, key=lambda g: g.device)

    def _processes(self, pids: set[int]) -> dict[int, str]:
        return {int(pid): str(name or "") for _, _gpid, pid, name in self._scan(S.PROCESSES)
                if pid in pids}

    def _threads(self, pids: set[int]) -> dict[tuple[int, int], str]:
        out = {}
        for _, gtid, name_id in self._scan(S.THREAD_NAMES):
            if gtid is not None and S.pid_of(gtid) in pids:
                out[(S.pid_of(gtid), S.tid_of(gtid))] = self.strings.get(name_id)
        return out

    def _software(self) -> dict[str, str]:
        env = {str(k): str(v) for _, k, v in self._scan(S.SYSTEM_ENV)}
        out = {"nsys": self.schema.tool_version}
        cuda = env.get("CudaDriverVersion", "")
        if cuda.isdigit():
            out["cuda_driver"] = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
        out["nvidia_driver"] = _driver_version(env.get("NvDriverVersion", ""))
        if self._has_python_backtraces():
            out["nsys_python_backtrace"] = "yes"  # its host cost differs (profiler_cost)
        traced = sorted({str(v) for _, k, v in self._scan(S.CAPTURE_META)
                         if k == "CAPTURE_EVENT_TYPE" and v})
        if traced:
            out["nsys_traced"] = ",".join(traced)  # what the host paid for (profiler_cost)
        return {k: v for k, v in out.items() if v}

    def _has_python_backtraces(self) -> bool:
        """Whether the capture collected Python backtraces (``--python-backtrace``): nsys
        writes them to tables named PYTHON_*; an empty such table means none were taken."""
        for name in self.schema.table_names():
            if "PYTHON" in name.upper():
                q = f'SELECT 1 FROM "{name}" LIMIT 1'
                if self.schema.conn.execute(q).fetchone() is not None:
                    return True
        return False

    def _notes(self, w: Window, calls: list[ApiCall], ops: list[GpuOp]) -> None:
        notes, totals = self.info.notes, self.info.totals
        if totals["kernels"] == 0 and totals["graphs"] == 0:
            notes.append("no GPU kernels in the trace: there is no GPU work to analyse")
        if not self.info.gpus:
            notes.append("the export has no TARGET_INFO_GPU table: the GPU model is unknown")
        if "DERIVED_FROM" in self.schema.meta:
            notes.append(f"this export was cut from a longer capture "
                         f"({self.schema.meta['DERIVED_FROM']}); events crossing its edges "
                         "lack their partner")
        if not w.whole:
            notes.append(f"detailed events loaded for {w.description}")
        unlaunched = _count_unmatched(ops, calls)
        if unlaunched:
            notes.append(f"{unlaunched} of {len(ops)} GPU ops have no launching call in the "
                         "loaded events (launched before the capture or window began)")


# ----- row -> model ----------------------------------------------------------------------------


def _number_backward_nodes(ranges: list[CpuRange]) -> None:
    """Give each ``autograd::engine::evaluate_function: XBackward0`` range the sequence number
    of the node it runs. emit_nvtx writes the number on the node's own range, nested right
    inside (``XBackward0, seq = 3142, op_id = 1225`` under ``...evaluate_function:
    XBackward0, op_id = 1224``: the HF GPT-2 capture's shape probe), where torch.profiler
    writes it on the outer range; the source-line attribution reads it there
    (`advisor.graph.source_lines`), as from a Kineto trace."""
    outer = [r for r in ranges if r.source is RangeSource.OPERATOR and r.sequence < 0
             and r.name.startswith(EVALUATE_FUNCTION)]
    if not outer:
        return
    nodes: dict[tuple[int, int, str], list[CpuRange]] = {}
    for r in ranges:
        if r.fwd_thread > 0 and not r.name.startswith(EVALUATE_FUNCTION):
            nodes.setdefault((r.pid, r.tid, r.name), []).append(r)
    starts: dict[tuple[int, int, str], list[int]] = {}
    for key, found in nodes.items():
        found.sort(key=lambda r: r.start_ns)
        starts[key] = [n.start_ns for n in found]
    for r in outer:
        key = (r.pid, r.tid, r.name[len(EVALUATE_FUNCTION):].strip())
        found = nodes.get(key)
        if not found:
            continue
        i = bisect_left(starts[key], r.start_ns)
        if i < len(found) and found[i].end_ns <= r.end_ns:
            r.sequence, r.fwd_thread = found[i].sequence, found[i].fwd_thread


def _layer(ev_class: int | None, name: str, driver_class: int | None) -> ApiLayer:
    if ev_class is None:
        return ApiLayer.DRIVER if name.startswith("cu") and not name.startswith("cuda") \
            else ApiLayer.RUNTIME
    return ApiLayer.DRIVER if ev_class == driver_class else ApiLayer.RUNTIME


def _memcpy(row: tuple, code: int, copy_kinds: dict[int, tuple[str, str]],
            host_kinds: dict[int, str]) -> GpuOp:
    (rowid, start, end, device, stream, corr, gpid, nbytes, kind, src, dst, node_id) = row
    copy_kind, host_side = copy_kinds.get(kind, ("", ""))
    sides = {"src": (src,), "dst": (dst,), "both": (src, dst)}.get(host_side, ())
    memories = {host_kinds.get(k, "") for k in sides} - {""}
    host_memory = "pageable" if "pageable" in memories else ("pinned" if memories else "")
    return GpuOp(
        rowid * 4 + code, GpuOpKind.MEMCPY, f"Memcpy {copy_kind}".strip(), start, end, device,
        stream, S.pid_of(gpid), corr, bytes=nbytes or 0, copy_kind=copy_kind,
        host_memory=host_memory, graph_id=None if node_id is None else node_id >> 32,
    )


def _memset(row: tuple, code: int) -> GpuOp:
    rowid, start, end, device, stream, corr, gpid, nbytes, node_id = row
    return GpuOp(rowid * 4 + code, GpuOpKind.MEMSET, "Memset", start, end, device, stream,
                 S.pid_of(gpid), corr, bytes=nbytes or 0,
                 graph_id=None if node_id is None else node_id >> 32)


def _graph(row: tuple, code: int) -> GpuOp:
    rowid, start, end, device, stream, corr, gpid, graph_id, _exec_id = row
    return GpuOp(rowid * 4 + code, GpuOpKind.GRAPH, f"CUDA graph {graph_id}", start, end, device,
                 stream, S.pid_of(gpid), corr, graph_id=graph_id)


def _driver_version(raw: str) -> str:
    """``52510517`` (nsys 2022-2024 packs it as major*10^5 + minor*100 + patch) -> ``525.105.17``."""
    if raw.isdigit() and len(raw) == 8:
        value = int(raw)
        return f"{value // 100000}.{value // 100 % 1000:02d}.{value % 100:02d}"
    return raw


def _window_span(w: Window, calls: list[ApiCall], ops: list[GpuOp],
                 ranges: list[CpuRange]) -> tuple[int, int] | None:
    if not w.whole:
        return (w.start_ns, w.end_ns)
    events: list = [*calls, *ops, *ranges]
    if not events:
        return None
    return (min(e.start_ns for e in events), max(e.end_ns for e in events))


def _count_unmatched(ops: list[GpuOp], calls: list[ApiCall]) -> int:
    """GPU ops whose launching call is not among the loaded calls."""
    launched = {(c.pid, c.correlation) for c in calls}
    return sum(1 for o in ops if (o.pid, o.correlation) not in launched)
