"""Finds the training steps of an unmodified script and marks them and their phases.

A step runs from the end of one ``optimizer.step()`` to the end of the next (global optimizer
step hooks). Inside it, on the thread that runs the loop:

- ``data``: a DataLoader iterator's ``__next__``;
- ``forward``: the outermost module call (global module hooks find which modules are called at
  the top; after the first step only those keep hooks, so the other modules' calls stay on
  PyTorch's no-hook fast path);
- ``loss``: from the end of forward to the start of backward (loss modules called at the top
  stay in it);
- ``backward``: ``torch.autograd.backward`` (which ``Tensor.backward`` calls);
- ``optimizer``: from the end of backward to the end of ``optimizer.step()`` (gradient
  clipping and unscaling included).

With several optimizers the step ends at the last one of the cycle they repeat in. Loops these
hooks cannot see use `advisor.capture.step` / `advisor.capture.phase`; once ``step`` is used,
the optimizer hooks stop cutting steps.

Outside the recorded window every hook is a few attribute checks, an NVTX call that returns at
once without a tool attached, and at each step boundary one read of the host's monotonic clock
(``time.perf_counter_ns``, no CUDA synchronization): those readings are the measured step times
of the unprofiled job (`advisor.capture.steptimes`), and they also decide when the recorded
window starts (`advisor.capture.settle`). A few rare calls (a DataLoader iterator's start,
``torch.save``, a forward pass under ``no_grad``) are timed too, to tell where the time between
steady steps went (`advisor.capture.accounting`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.capture.marks import Marker, nvtx_backend
from advisor.capture.settle import SETTLE_MAX_WAIT, prefetched_batches, settle_reason
from advisor.graph.gemm_shapes import SHAPE_PROBE_RANGE

DISCOVERY_STEPS = 3
"""Steps during which global module hooks look for the top-level modules before giving up."""


HOST_ACTIVITIES = ("data", "loader_start", "eval", "checkpoint")
"""Host work timed on every step (ns per step): time in a DataLoader iterator's ``__next__``,
in starting one (``iter(loader)``: worker processes start there), in forward passes with
autograd off (evaluation), in ``torch.save`` (checkpoints)."""


STEPS_MEASURED_AFTER = 20
"""Unprofiled steps timed after the window before the measured step is handed to the analysis
running beside the job (`advisor.capture.background`) and before ``--then stop`` stops the job:
the steps before the window are warm-up, so these are the first steady steps the clock sees."""


class StopAfterWindow(KeyboardInterrupt):
    """Raised into the script at a step boundary by ``--then stop``: a KeyboardInterrupt, so the
    script's own clean-up for Ctrl-C runs (frameworks end ``fit`` gracefully on it)."""


@dataclass
class WindowPlan:
    wait: int | None = None  # steps before the recorded window; None: until the step settles
    steps: int = 10  # steps recorded
    at_seconds: float | None = None  # or: the first boundary this long after the start
    stop_after: bool = False  # --then stop: end the job once the measured steps are in
    measure_after: int = STEPS_MEASURED_AFTER


@dataclass
class CaptureState:
    """What the session saw; written to the status file and used to pick what to analyse."""

    complete: list[int] = field(default_factory=list)  # indices of steps that ran to their end
    recorded: list[int] = field(default_factory=list)  # complete steps inside the window
    incomplete: list[str] = field(default_factory=list)  # recorded step ranges that did not end
    window_started: bool = False
    window_done: bool = False
    skipped_reason: str | None = None  # why the window was not recorded
    explicit: bool = False  # steps came from advisor.capture.step()
    optimizers: int = 0  # distinct optimizers in the step cycle, once known
    optimizer_steps: int = 0
    top_modules: list[str] = field(default_factory=list)
    # Host clock (perf_counter_ns, relative to `run_start_ns`) of every step that ran to its end:
    # [index, start, end]; a step starts after the window's own start/stop work is done.
    step_times: list[list[int]] = field(default_factory=list)
    # Host activities per step, ns (HOST_ACTIVITIES), by step index; -1: outside any step.
    activity: dict[int, dict[str, int]] = field(default_factory=dict)
    window_first: int | None = None  # index of the first recorded step
    window_pinned: bool = False  # the user set --wait
    settled_at: int | None = None  # step after which the step time was judged settled
    window_reason: str = ""  # when the window opened and why, for the reports
    run_start_ns: int = 0
    run_end_ns: int | None = None
    stopped_after_window: bool = False  # --then stop ended the job
    run_start_unix: float = 0.0  # wall clock at `run_start_ns`, to line up with other processes
    # For fixes in the script's own framework and loader estimates bounded by the host
    # (`advisor.engine.host`): CPUs this process may use, the DataLoader the loop draws from
    # (its settings), framework packages imported, packages on the first optimizer.step()'s stack.
    host_cores: int | None = None
    loader: dict[str, Any] | None = None
    framework_modules: list[str] = field(default_factory=list)
    loop_modules: list[str] = field(default_factory=list)


FRAMEWORK_MODULES = ("lightning", "lightning.pytorch", "pytorch_lightning", "transformers",
                     "transformers.trainer", "accelerate", "deepspeed", "timm")
"""Packages whose presence `advisor.engine.framework` reads (not the whole ``sys.modules``)."""


def _loader_config(it: Any) -> dict[str, Any]:
    """A DataLoader iterator's settings, from its private attributes (stable since 1.7)."""
    return {"num_workers": int(getattr(it, "_num_workers", 0) or 0),
            "pin_memory": bool(getattr(it, "_pin_memory", False)),
            "persistent_workers": bool(getattr(it, "_persistent_workers", False)),
            "prefetch_factor": getattr(it, "_prefetch_factor", None),
            "batch_size": getattr(getattr(it, "_index_sampler", None), "batch_size", None)}


def _stack_packages(depth: int = 60) -> list[str]:
    """Top-level package names on the calling stack, innermost first, each once."""
    out: list[str] = []
    frame = sys._getframe(1)
    while frame is not None and depth:
        mod = frame.f_globals.get("__name__", "")
        parts = mod.split(".")
        for name in (".".join(parts[:2]), parts[0]):
            if name and name not in out and parts[0] not in ("advisor", "click", "runpy"):
                out.append(name)
        frame, depth = frame.f_back, depth - 1
    return out


class Session:
    def __init__(self, plan: WindowPlan | None, recorder: Any = None, *,
                 progress: Callable[[str], None] | None = None,
                 status: Callable[[str], None] | None = None, nvtx: str = "auto",
                 on_window_closed: Callable[[CaptureState], None] | None = None,
                 on_measured: Callable[[CaptureState], None] | None = None) -> None:
        import torch

        self._torch = torch
        self.plan = plan or WindowPlan()
        self.recorder = recorder
        self.state = CaptureState()
        self.marker = Marker(nvtx_backend(nvtx))
        self._progress = progress or (lambda msg: None)  # what went wrong: unless --quiet
        self._status = status or (lambda msg: None)  # where the window is: on a terminal only
        self.tid = threading.main_thread().ident
        self.recording = False  # record_function marks go into the trace
        self.window_open = False
        self.follow_profiler = recorder is None  # standalone API: mark when any profiler runs

        self.index = -1  # the open step, -1 when none
        self._next = 0
        self._step_mark: tuple[Any, Any] | None = None
        self._step_recorded = False
        self.phase: str | None = None
        self._phase_mark: tuple[Any, Any] | None = None
        self._explicit_phases: list[tuple[Any, Any]] = []
        self.depth = 0  # calls of hooked modules on the loop thread
        self.in_backward = False
        self.in_data = False
        self.opt_depth = 0
        self._cycle: list[int] = []
        self._boundary: int | None = None  # id() of the optimizer whose step ends a step
        self._discovering = True
        self._discovery_left = DISCOVERY_STEPS
        self._top: dict[int, Any] = {}  # id -> module, top-level modules seen while discovering
        self._handles: list[Any] = []
        self._module_handles: list[Any] = []
        self._undo: list[Callable[[], None]] = []
        self._loss_type: type = torch.nn.modules.loss._Loss
        self.installed = False
        self._clock = time.perf_counter_ns
        self._t0 = self._clock()
        self.state.run_start_ns = self._t0  # the step clock's origin (advisor.capture.pystacks)
        self.state.run_start_unix = time.time()
        self._step_start = 0
        self._act: dict[str, int] = {}  # host activities of the open step (or before the first)
        self._eval_from: int | None = None
        self._prepared_at: int | None = None
        # Called (guarded) when the window's trace is written, and once `measure_after` steps
        # later: what starts the analysis beside the job (`advisor.capture.runner`).
        self._on_window_closed = on_window_closed
        self._on_measured = on_measured
        self._measured_at: int | None = None  # the step whose end hands the measured steps over
        self._stop_raised = False
        self._finishing = False
        self._recorder_busy = False  # a recorder action (start, stop, trace write) under way
        self.handing_over = False  # a callback to the analysis beside the job under way
        self._graph_captures = 0  # CUDA graph captures under way (any thread)

    # ----- marks -----------------------------------------------------------------------------

    def _profiling(self) -> bool:
        if self.follow_profiler:
            import torch.autograd.profiler as autograd_profiler

            return bool(autograd_profiler._is_profiler_enabled)
        return self.recording

    def set_phase(self, name: str | None) -> None:
        if self._phase_mark is not None:
            self.marker.close(self._phase_mark)
            self._phase_mark = None
        self.phase = name
        if name is not None:
            if getattr(self.recorder, "probe_open", False):  # CudaProfilerRecorder.phase_mark
                self._guarded(lambda: self.recorder.phase_mark(name, self.opt_depth > 0))
            rf = self._profiling() if self.follow_profiler else self.recording
            if rf or self.marker.live:  # else nothing would be opened (`Marker.open`)
                self._phase_mark = self.marker.open(name, "phase", rf)

    def _window_at(self, n: int) -> tuple[bool, bool]:
        """Whether step ``n`` is the one before the window (prepare) and the window's first."""
        plan, st = self.plan, self.state
        if plan.wait is not None:
            if not st.window_pinned:  # once: this runs at every boundary before the window
                st.window_pinned = True
                st.window_reason = f"at step {plan.wait}, pinned by --wait/--window-at"
            return n == plan.wait - 1, n == plan.wait
        if self._prepared_at is None:
            if plan.at_seconds is not None:  # --window-at TIME: the first boundary after it
                st.window_pinned = True
                if self._clock() - self._t0 < plan.at_seconds * 1e9:
                    return False, False
                self._prepared_at = n
                st.settled_at = n
                st.window_reason = (f"at step {n + 1}, the first boundary after "
                                    f"{plan.at_seconds:g} s (--window-at)")
                return True, False
            why = self._settled_why(n)
            if why is not None:
                self._prepared_at = n
                st.settled_at = n
                st.window_reason = why
                return True, False
            return False, False
        return False, n == self._prepared_at + 1

    def _settled_why(self, n: int) -> str | None:
        """Why the window may open at step ``n + 1`` (`advisor.capture.settle`), or None."""
        st = self.state
        times = [e - b for _, b, e in st.step_times]
        waits = ([st.activity.get(i, {}).get("data", 0) for i, _, _ in st.step_times]
                 if st.loader is not None else [])
        loader = st.loader or {}
        why = settle_reason(times, waits, prefetched_batches(loader),
                            int(loader.get("_batches", 0)))
        if why is not None:
            return f"at step {n + 1}, once the step time had settled: {why}"
        if n >= SETTLE_MAX_WAIT:
            return (f"at step {n + 1} without the step time settling (after {SETTLE_MAX_WAIT} "
                    "steps the window starts anyway; --window-at pins it)")
        return None

    def _flush_activity(self, key: int) -> None:
        if self._act:
            into = self.state.activity.setdefault(key, {})
            for k, v in self._act.items():
                into[k] = into.get(k, 0) + v
            self._act = {}

    def add_activity(self, name: str, ns: int) -> None:
        self._act[name] = self._act.get(name, 0) + ns

    def _begin_step(self) -> None:
        if self._act:  # host work between steps (before the first, explicit gaps)
            self._flush_activity(-1)
        n = self._next
        self._next += 1
        rec, st = self.recorder, self.state
        probe = False
        if rec is not None and not st.window_started and not st.window_done:
            prepare, start = self._window_at(n)
            if prepare:
                self._guarded(rec.prepare)
                probe = getattr(rec, "probing", False)
            if start:
                self._start_window(n)
        self.index = n
        self._step_recorded = self.window_open
        # The shape probe (`CudaProfilerRecorder`) is named so that no reader counts it a step.
        if probe:
            self._step_mark = self.marker.open(SHAPE_PROBE_RANGE, "probe", False)
        else:
            prof = self._profiling()  # the step's name is made only when something shows it
            self._step_mark = (self.marker.open(f"step {n}", "step", prof)
                               if prof or self.marker.live else None)
        self._step_start = self._clock() - self._t0

    def _end_step(self, complete: bool) -> None:
        if self.index < 0:
            return
        end = self._clock() - self._t0
        if self.phase is not None or self._phase_mark is not None:
            self.set_phase(None)
        n = self.index
        if self._act:
            self._flush_activity(n)
        if complete:
            self.marker.close(self._step_mark)
            self.state.complete.append(n)
            self.state.step_times.append([n, self._step_start, end])
            if self._step_recorded:
                self.state.recorded.append(n)
        else:
            # A step that never ended: close its profiler range (renamed in the trace) and
            # leave the NVTX range open, so no reader takes it for a whole step.
            self.marker.close(self._step_mark, nvtx=False)
            if self._step_recorded:
                self.state.incomplete.append(f"step {n}")
        self._step_mark = None
        self.index = -1
        first = self.state.window_first
        if self.window_open and first is not None and n + 1 >= first + self.plan.steps:
            self._stop_window()

    def _start_window(self, first: int) -> None:
        rec, st, plan = self.recorder, self.state, self.plan
        if rec.busy():
            st.window_done = True
            st.skipped_reason = "the script runs its own torch.profiler"
            self._progress("advisor: the script runs its own torch.profiler: nothing recorded")
            return
        st.window_started = True
        if not self._guarded(rec.start):
            st.window_done = True
            return
        self.window_open = True
        st.window_first = first
        self.recording = rec.marks_profiler
        why = f", {st.window_reason}" if st.window_reason else ""
        self._status(f"recording steps {first}-{first + plan.steps - 1} ({rec.kind}{why})")

    def _stop_window(self) -> None:
        self.recording = False
        self.window_open = False
        self.state.window_done = True
        ok = self._guarded(lambda: self.recorder.stop(list(self.state.incomplete)))
        if ok:
            where = getattr(self.recorder, "trace_path", None)
            self._status(f"{len(self.state.recorded)} steps recorded"
                         + (f" to {where}" if where and self.recorder.written else "")
                         + ("; the job stops after the next "
                            f"{self.plan.measure_after} steps (--then stop)"
                            if self.plan.stop_after else "; the job runs on unprofiled"))
            if self.state.recorded and self.index < 0 and not self._finishing:
                self._record_host()  # the analysis beside the job starts now: give it the host
                last = self.state.recorded[-1]
                self._measured_at = last + 1 + max(1, self.plan.measure_after)
                if self._on_window_closed is not None:
                    self._guarded_callback(self._on_window_closed)

    def _guarded(self, fn: Callable[[], None]) -> bool:
        """Run a recorder action; a failure is reported, never raised into the script."""
        self._recorder_busy = True  # a SIGTERM landing here leaves the recorder alone
        try:
            fn()
            return True
        except Exception as e:  # the user's job must go on even if tracing breaks
            self.state.skipped_reason = f"{type(e).__name__}: {e}"
            if self.recorder is not None:
                self.recorder.error = self.state.skipped_reason
            self._progress(f"advisor: tracing failed ({self.state.skipped_reason}); "
                           "the job goes on unprofiled")
            self.recording = False
            self.window_open = False
            return False
        finally:
            self._recorder_busy = False

    def _capturing(self) -> bool:
        """Whether a CUDA graph is being captured: a counter kept by wrappers of
        ``CUDAGraph.capture_begin``/``capture_end`` (what ``torch.cuda.graph``,
        ``make_graphed_callables`` and torch.compile's CUDA graphs call), not a CUDA call per step:
        `benchmarks/hook_cost.py` measured +3.3% on a launch-bound H100 step with the hooks of the
        version that asked the runtime at each boundary."""
        return self._graph_captures > 0

    def boundary(self) -> None:
        """The end of one step and the start of the next."""
        if self._graph_captures > 0:  # `_capturing`, inlined: this runs at every boundary
            return  # a CUDA graph is being captured: its replays run no hooks anyway
        n = self.index
        self._end_step(complete=True)
        if self._discovering:
            self._discovery_left -= 1
            if self._top or self._discovery_left <= 0:
                self._end_discovery()
        if n >= 0 and n == self._measured_at:
            self._after_measured()
        self._begin_step()

    def _after_measured(self) -> None:
        """`measure_after` unprofiled steps ran after the window: hand their times over, and
        under ``--then stop`` end the job here, between two steps."""
        self._measured_at = None
        if self._on_measured is not None:
            self._guarded_callback(self._on_measured)
        if self.plan.stop_after and not self._stop_raised:
            self._stop_raised = True
            self.state.stopped_after_window = True
            raise StopAfterWindow("advisor: --then stop")

    def _guarded_callback(self, fn: Callable[[CaptureState], None]) -> None:
        self.handing_over = True  # a SIGTERM landing here does not hand over a second time
        try:
            fn(self.state)
        except Exception as e:  # the job goes on; the report comes when the job ends
            self._progress(f"advisor: could not start the analysis beside the job "
                           f"({type(e).__name__}: {e}); it runs when the job ends")
        finally:
            self.handing_over = False

    # ----- explicit API ----------------------------------------------------------------------

    def explicit_step_enter(self) -> None:
        if not self.state.explicit:
            self.state.explicit = True
            if self.index >= 0:  # an optimizer-cut step was open: it is not a whole step
                self._end_step(complete=False)
        self._end_step(complete=True)  # unbalanced use: the previous step ends here
        self._begin_step()

    def explicit_step_exit(self, complete: bool) -> None:
        if self.state.explicit and self._discovering:
            self._discovery_left -= 1
            if self._top or self._discovery_left <= 0:
                self._end_discovery()
        n = self.index
        self._end_step(complete)
        if complete and n >= 0 and n == self._measured_at:
            self._after_measured()

    def explicit_phase_enter(self, name: str) -> None:
        if not self._explicit_phases:
            self.set_phase(None)
        self._explicit_phases.append(self.marker.open(name, "phase", self._profiling()))

    def explicit_phase_exit(self) -> None:
        if self._explicit_phases:
            self.marker.close(self._explicit_phases.pop())

    # ----- hooks -----------------------------------------------------------------------------

    def install(self) -> None:
        """Install the hooks; `uninstall` restores everything."""
        torch = self._torch
        from torch.nn.modules import module as module_mod
        from torch.optim import optimizer as optimizer_mod
        from torch.utils.data import dataloader as dataloader_mod

        get_ident = threading.get_ident
        is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)  # torch < 2.3
        s = self
        loss_type = self._loss_type
        clock = self._clock
        grad_enabled = torch.is_grad_enabled

        def opt_pre(opt, args, kwargs):
            if get_ident() != s.tid:
                return None
            s.opt_depth += 1
            if s.opt_depth == 1 and not s._explicit_phases and s.phase != "optimizer":
                s.set_phase("optimizer")
            return None

        def opt_post(opt, args, kwargs):
            if get_ident() != s.tid:
                return
            s.opt_depth -= 1
            if s.opt_depth:
                return
            s.state.optimizer_steps += 1
            if s.state.optimizer_steps == 1:  # who runs the loop: once, a stack walk
                s.state.loop_modules = _stack_packages()
            if s.phase == "optimizer":
                s.set_phase(None)
            if not s.state.explicit and s._is_boundary(opt):
                s.boundary()

        def module_pre(module, args):
            if is_compiling() or get_ident() != s.tid:
                return None
            s.depth += 1
            if s.depth == 1 and s._eval_from is None and not grad_enabled():
                s._eval_from = clock()  # a forward pass with autograd off: evaluation
            if s.depth == 1 and not (s.in_backward or s.opt_depth or s.in_data
                                     or s._explicit_phases):
                if isinstance(module, loss_type):
                    if s.phase != "loss":
                        s.set_phase("loss")
                else:
                    if s._discovering:
                        s._top[id(module)] = module
                    s.set_phase("forward")
            return None

        def module_post(module, args, output):
            if is_compiling() or get_ident() != s.tid:
                return None
            s.depth -= 1
            if s.depth == 0:
                if s._eval_from is not None:
                    s.add_activity("eval", clock() - s._eval_from)
                    s._eval_from = None
                if s.phase == "forward":
                    s.set_phase("loss")
            return None

        self._module_pre, self._module_post = module_pre, module_post
        self._handles += [
            optimizer_mod.register_optimizer_step_pre_hook(opt_pre),
            optimizer_mod.register_optimizer_step_post_hook(opt_post),
            module_mod.register_module_forward_pre_hook(module_pre),
            module_mod.register_module_forward_hook(module_post, always_call=True),
        ]

        base_iter = dataloader_mod._BaseDataLoaderIter
        orig_next = base_iter.__next__
        cpu_clock = time.thread_time_ns
        batches: dict[int, int] = {}  # id(loader) -> batches drawn by the loop thread
        leading: list[Any] = [None]  # (dataset id, iterator id) whose settings state.loader holds

        def loader_seen(it):
            # the settings of the loader the loop draws the most batches from; read again only
            # when another iterator takes the lead (each batch of the same one: a count)
            key = id(getattr(it, "_dataset", it))
            n = batches[key] = batches.get(key, 0) + 1
            cur = s.state.loader
            if cur is None or n > cur.get("_batches", 0):
                if cur is not None and leading[0] == (key, id(it)):
                    cur["_batches"] = n
                else:
                    leading[0] = (key, id(it))
                    s.state.loader = {**_loader_config(it), "_batches": n}

        def counted(t: int, c: int | None) -> None:
            act = s._act  # `add_activity`, inlined: once per batch
            act["data"] = act.get("data", 0) + clock() - t
            act["data_batches"] = act.get("data_batches", 0) + 1
            if c is not None:
                act["data_cpu"] = act.get("data_cpu", 0) + cpu_clock() - c
                act["data_cpu_batches"] = act.get("data_cpu_batches", 0) + 1

        def __next__(it):
            if s.in_data or get_ident() != s.tid:
                return orig_next(it)
            # The loop thread's CPU time: with num_workers=0, the batch's whole loading cost
            # (`advisor.engine.host`). Read only there: the thread's CPU clock is a system call
            # (2 us a read on the shared development machine, `benchmarks/hook_cost.py --parts`),
            # and with workers the rules do not use it.
            t = clock()
            c = None if getattr(it, "_num_workers", 0) else cpu_clock()
            loader_seen(it)
            if s._explicit_phases:
                try:
                    return orig_next(it)
                finally:
                    counted(t, c)
            s.in_data = True
            s.set_phase("data")
            try:
                return orig_next(it)
            finally:
                s.in_data = False
                if s.phase == "data":
                    s.set_phase(None)
                counted(t, c)

        __next__.__wrapped__ = orig_next  # type: ignore[attr-defined]
        base_iter.__next__ = __next__
        self._undo.append(lambda: setattr(base_iter, "__next__", orig_next))
        # Starting an iterator (each epoch, unless persistent_workers) starts its worker
        # processes; the first batch then waits for them inside __next__.
        self._time_calls(dataloader_mod.DataLoader, "__iter__", "loader_start",
                         counts=_starts_workers)
        self._time_calls(torch, "save", "checkpoint")
        self._count_graph_captures()

        autograd = torch.autograd
        orig_backward = autograd.backward

        def backward(*args, **kwargs):
            if s.in_backward or get_ident() != s.tid:
                return orig_backward(*args, **kwargs)
            s.in_backward = True
            auto = not s._explicit_phases
            if auto:
                s.set_phase("backward")
            try:
                return orig_backward(*args, **kwargs)
            finally:
                s.in_backward = False
                if auto and s.phase == "backward":
                    # What follows backward (clipping, unscaling) belongs to the update; with
                    # gradient accumulation the next data or forward closes it at once.
                    s.set_phase("optimizer")

        backward.__wrapped__ = orig_backward  # type: ignore[attr-defined]
        backward.__doc__ = orig_backward.__doc__
        autograd.backward = backward
        self._undo.append(lambda: setattr(autograd, "backward", orig_backward))
        self.installed = True

    def _count_graph_captures(self) -> None:
        graph = getattr(self._torch.cuda, "CUDAGraph", None)
        if graph is None or not hasattr(graph, "capture_begin"):
            return
        s = self

        def wrap(attr: str, delta: int) -> None:
            orig = getattr(graph, attr)

            def counted(*args, **kwargs):
                if delta > 0:
                    s._graph_captures += 1
                    try:
                        return orig(*args, **kwargs)
                    except BaseException:
                        s._graph_captures -= 1
                        raise
                try:
                    return orig(*args, **kwargs)
                finally:
                    s._graph_captures = max(0, s._graph_captures - 1)

            counted.__wrapped__ = orig  # type: ignore[attr-defined]
            counted.__doc__ = orig.__doc__
            counted.__name__ = attr
            setattr(graph, attr, counted)
            self._undo.append(lambda: setattr(graph, attr, orig))

        wrap("capture_begin", +1)
        wrap("capture_end", -1)

    def _time_calls(self, owner: Any, attr: str, activity: str,
                    counts: Callable[..., bool] | None = None) -> None:
        """Wrap ``owner.attr`` so the loop thread's calls of it add to a host activity
        (those for which ``counts(*args)`` holds, when given)."""
        orig = getattr(owner, attr)
        get_ident, clock, s = threading.get_ident, self._clock, self

        def timed(*args, **kwargs):
            if get_ident() != s.tid or (counts is not None and not counts(*args, **kwargs)):
                return orig(*args, **kwargs)
            t = clock()
            try:
                return orig(*args, **kwargs)
            finally:
                s.add_activity(activity, clock() - t)
                s.add_activity(activity + "_calls", 1)

        timed.__wrapped__ = orig  # type: ignore[attr-defined]
        timed.__doc__ = orig.__doc__
        timed.__name__ = getattr(orig, "__name__", attr)
        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, orig))

    def _is_boundary(self, opt: Any) -> bool:
        """Whether this optimizer's step ends a training step (the cycle's last optimizer)."""
        key = id(opt)
        if self._boundary is not None:
            return key == self._boundary
        if key in self._cycle:  # the cycle repeats: its last optimizer ends each step
            self._boundary = self._cycle[-1]
            self.state.optimizers = len(self._cycle)
            return key == self._boundary
        self._cycle.append(key)
        return True  # until the cycle is known, every new optimizer ends a step

    def _end_discovery(self) -> None:
        """Keep module hooks only on the top-level modules found (or none)."""
        if self.depth:
            return  # inside a module call: try again at the next boundary
        self._discovering = False
        for h in self._handles[2:]:
            h.remove()
        del self._handles[2:]
        for module in self._top.values():
            self._module_handles += [
                module.register_forward_pre_hook(self._module_pre),
                module.register_forward_hook(self._module_post, always_call=True),
            ]
            self.state.top_modules.append(type(module).__name__)
        self._top = {}

    def finish(self) -> None:
        """The script ended (or raised): close what is open, stop the window, remove hooks."""
        self._finishing = True
        for mark in reversed(self._explicit_phases):
            self.marker.close(mark)
        self._explicit_phases.clear()
        if self.index >= 0:
            self._end_step(complete=False)
        if self.window_open:
            self._stop_window()
        elif getattr(self.recorder, "probing", False):  # ended inside the shape probe
            self._guarded(lambda: self.recorder.stop([]))
        self._flush_activity(-1)
        self.state.run_end_ns = self._clock() - self._t0
        self._record_host()
        self.uninstall()

    def terminate(self) -> None:
        """SIGTERM (`advisor.capture.jobproc`): `finish` from the signal handler, between two
        bytecodes of whatever ran. The window is closed and its trace written unless the
        signal interrupted a recorder action itself (that one is not re-entered)."""
        if self._recorder_busy:
            self.window_open = False
            self.recorder = None
        self.finish()

    def tracer_started(self) -> bool:
        """Whether the recorder's tracer (Kineto, with its threads) was ever started here."""
        rec = self.recorder
        return self.state.window_started or getattr(rec, "_prof", None) is not None

    def detach(self) -> None:
        """A forked child (`advisor.capture.jobproc`): every hook returns at once (none is on
        the child's thread), and nothing of the parent's window or files is touched."""
        self.tid = None
        self.recorder = None
        self.recording = self.window_open = False
        self._on_window_closed = self._on_measured = None
        self.plan.stop_after = False

    def _record_host(self) -> None:
        """The host's cores and the framework packages the script imported."""
        import os

        try:
            self.state.host_cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux
            self.state.host_cores = os.cpu_count()
        self.state.framework_modules = [m for m in FRAMEWORK_MODULES if m in sys.modules]

    def uninstall(self) -> None:
        for h in self._handles + self._module_handles:
            h.remove()
        self._handles.clear()
        self._module_handles.clear()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self.installed = False


def _starts_workers(loader: Any, *args: Any, **kwargs: Any) -> bool:
    """Whether ``iter(loader)`` starts worker processes (persistent ones start only once)."""
    if getattr(loader, "num_workers", 0) <= 0:
        return False
    return not (getattr(loader, "persistent_workers", False)
                and getattr(loader, "_iterator", None) is not None)


_active: Session | None = None


def active() -> Session | None:
    return _active


def activate(session: Session | None) -> None:
    global _active
    _active = session


def standalone() -> Session:
    """The session behind `advisor.capture.step` when the script runs outside `advisor profile`:
    marks only (NVTX, and record_function while any torch.profiler records), no hooks."""
    global _active
    if _active is None:
        _active = Session(None, None)
    return _active


def _write(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


progress_to_stderr = _write
