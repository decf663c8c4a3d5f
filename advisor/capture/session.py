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
from typing import Any

from advisor.capture.capture_state import CaptureState, StopAfterWindow, WindowPlan
from advisor.capture.hooks import Hooks
from advisor.capture.host_probe import record_host
from advisor.capture.marks import Marker, nvtx_backend
from advisor.capture.settle import SETTLE_MAX_WAIT, prefetched_batches, settle_reason
from advisor.graph.gemm_shapes import SHAPE_PROBE_RANGE

DISCOVERY_STEPS = 3
"""Steps during which global module hooks look for the top-level modules before giving up."""


class Session:
    """One script's loop as the hooks see it: the open step and phase, the recorded window,
    the marks, and the state (`CaptureState`) the reports are built from."""

    def __init__(self, plan: WindowPlan | None, recorder: Any = None, *,
                 progress: Callable[[str], None] | None = None,
                 status: Callable[[str], None] | None = None, nvtx: str = "auto",
                 on_window_closed: Callable[[CaptureState], None] | None = None,
                 on_measured: Callable[[CaptureState], None] | None = None) -> None:
        import torch

        self.torch = torch
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
        self.explicit_phases: list[tuple[Any, Any]] = []
        self.depth = 0  # calls of hooked modules on the loop thread
        self.in_backward = False
        self.in_data = False
        self.opt_depth = 0
        self._cycle: list[int] = []
        self._boundary: int | None = None  # id() of the optimizer whose step ends a step
        self.discovering = True
        self._discovery_left = DISCOVERY_STEPS
        self.top: dict[int, Any] = {}  # id -> module, top-level modules seen while discovering
        self.clock = time.perf_counter_ns
        self._t0 = self.clock()
        self.state.run_start_ns = self._t0  # the step clock's origin (advisor.capture.pystacks)
        self.state.run_start_unix = time.time()
        self._step_start = 0
        self._act: dict[str, int] = {}  # host activities of the open step (or before the first)
        self.eval_from: int | None = None
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
        self.graph_captures = 0  # CUDA graph captures under way (any thread)
        self.hooks = Hooks(self)

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
                if self.clock() - self._t0 < plan.at_seconds * 1e9:
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
        self._step_start = self.clock() - self._t0

    def _end_step(self, complete: bool) -> None:
        if self.index < 0:
            return
        end = self.clock() - self._t0
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
                record_host(self.state)  # the analysis beside the job starts now: give it the host
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
        return self.graph_captures > 0

    def boundary(self) -> None:
        """The end of one step and the start of the next."""
        if self.graph_captures > 0:  # `_capturing`, inlined: this runs at every boundary
            return  # a CUDA graph is being captured: its replays run no hooks anyway
        n = self.index
        self._end_step(complete=True)
        if self.discovering:
            self._discovery_left -= 1
            if self.top or self._discovery_left <= 0:
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
        if self.state.explicit and self.discovering:
            self._discovery_left -= 1
            if self.top or self._discovery_left <= 0:
                self._end_discovery()
        n = self.index
        self._end_step(complete)
        if complete and n >= 0 and n == self._measured_at:
            self._after_measured()

    def explicit_phase_enter(self, name: str) -> None:
        if not self.explicit_phases:
            self.set_phase(None)
        self.explicit_phases.append(self.marker.open(name, "phase", self._profiling()))

    def explicit_phase_exit(self) -> None:
        if self.explicit_phases:
            self.marker.close(self.explicit_phases.pop())

    # ----- hooks -----------------------------------------------------------------------------

    @property
    def installed(self) -> bool:
        return self.hooks.installed

    def install(self) -> None:
        """Install the hooks (`advisor.capture.hooks`); `uninstall` restores everything."""
        self.hooks.install()

    def is_boundary(self, opt: Any) -> bool:
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
        self.discovering = False
        self.state.top_modules += self.hooks.keep_only(self.top.values())
        self.top = {}

    def finish(self) -> None:
        """The script ended (or raised): close what is open, stop the window, remove hooks."""
        self._finishing = True
        for mark in reversed(self.explicit_phases):
            self.marker.close(mark)
        self.explicit_phases.clear()
        if self.index >= 0:
            self._end_step(complete=False)
        if self.window_open:
            self._stop_window()
        elif getattr(self.recorder, "probing", False):  # ended inside the shape probe
            self._guarded(lambda: self.recorder.stop([]))
        self._flush_activity(-1)
        self.state.run_end_ns = self.clock() - self._t0
        record_host(self.state)
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

    def uninstall(self) -> None:
        self.hooks.uninstall()


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
