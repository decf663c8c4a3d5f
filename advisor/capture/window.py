"""What records the window of steps: torch.profiler (Kineto), or Nsight Systems via the CUDA
profiler API. Each is driven by the session at step boundaries: ``prepare`` one step before the
window (tracer start-up lands in an unrecorded step), ``start`` and ``stop`` at the window's
edges, ``finish`` once at the end (writes the trace)."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import sys
import tempfile
from pathlib import Path


class KinetoRecorder:
    """torch.profiler over the window; the trace is written gzipped as soon as the window ends."""

    kind = "torch.profiler"
    marks_profiler = True  # steps and phases also go into the trace as record_function ranges

    def __init__(self, trace_path: Path, stacks: bool = True) -> None:
        self.trace_path = trace_path
        # Python stacks (with_stack) inside the window only: they cost per Python call while
        # recording (measured, and removed from estimates, in advisor.engine.profiler_cost) and
        # nothing outside the window, and they let reports name the user's source lines.
        self.stacks = stacks
        self._prof = None
        self._started = False
        self.written = False
        self.error: str | None = None

    def _profiler(self):
        if self._prof is None:
            import torch
            from torch.profiler import ProfilerActivity, _KinetoProfile

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            self._prof = _KinetoProfile(activities=activities, record_shapes=True,
                                        with_stack=self.stacks)
        return self._prof

    @staticmethod
    def busy() -> bool:
        """True when the script runs a torch.profiler of its own (two cannot run at once)."""
        import torch.autograd.profiler as autograd_profiler

        return bool(autograd_profiler._is_profiler_enabled)

    def prepare(self) -> None:
        cupti_teardown()
        self._profiler().prepare_trace()

    def start(self) -> None:
        cupti_teardown()
        prof = self._profiler()
        if prof.profiler is None:
            prof.prepare_trace()
        prof.start_trace()
        self._started = True

    def stop(self, incomplete: list[str]) -> None:
        """Stop recording and write the trace; ``incomplete`` names step ranges to disown."""
        if not self._started:
            return
        self._started = False
        self._prof.stop_trace()
        prof, self._prof = self._prof, None
        write_trace(self.trace_path, lambda raw: prof.export_chrome_trace(str(raw)), incomplete)
        self.written = True


def write_trace(path: Path, export, incomplete: list[str]) -> None:
    """The window's trace at ``path``, gzipped, through new files in its directory renamed over
    it at the end: a link planted at ``path`` (or at the plain ``.json`` beside it) is replaced,
    never written through, and a reader never sees half a trace. ``export(raw)`` writes the
    plain JSON trace to ``raw``."""
    folder = path.parent
    made: list[str] = []
    try:
        fd, raw = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".json")
        os.close(fd)
        made.append(raw)
        export(Path(raw))
        if incomplete:
            _rename_ranges(Path(raw), incomplete)
        fd, packed = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        made.append(packed)
        with open(raw, "rb") as src, os.fdopen(fd, "wb") as out, \
                gzip.GzipFile(filename=path.with_suffix("").name, mode="wb", fileobj=out,
                              compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(packed, 0o666 & ~umask)  # as a plain open() would have created it
        os.replace(packed, path)
        made.remove(packed)
    finally:
        for leftover in made:
            with contextlib.suppress(OSError):
                os.unlink(leftover)


def cupti_teardown() -> None:
    """Let Kineto finalize CUPTI when the window's trace stops, so the job's later steps run
    without CUPTI's callbacks. Without it (Kineto's default unless ``TEARDOWN_CUPTI=1``,
    pytorch/pytorch#144455) the H100 measured plain steps of a launch-bound loop 34% slower after
    one window than before it (`benchmarks/hook_cost.py`), and nanoGPT's own iterations after the
    window 12% slower than in a run without advisor. A value the user set is kept; so is
    torch's own choice for CUDA graphs before CUDA 12.6 (it sets ``0``: a re-initialisation after
    a teardown crashed there)."""
    if "TEARDOWN_CUPTI" in os.environ:
        return
    import torch

    cuda = getattr(torch.version, "cuda", None)
    if not cuda:
        return
    try:
        major, minor = (int(x) for x in cuda.split(".")[:2])
    except ValueError:
        return
    if (major, minor) >= (12, 6):
        os.environ["TEARDOWN_CUPTI"] = "1"


def _rename_ranges(path: Path, names: list[str]) -> None:
    """Rename step ranges that did not complete, so no reader counts them as steps."""
    data = path.read_bytes()
    for name in names:
        for sep in (b'": "', b'":"'):
            old = b'"name' + sep + name.encode() + b'"'
            data = data.replace(old, b'"name' + sep + name.encode() + b' (incomplete)"')
    path.write_bytes(data)


class CudaProfilerRecorder:
    """cudaProfilerStart/Stop around the window, for `nsys profile --capture-range=cudaProfilerApi`.

    The capture opens one step early, on a shape probe: that step runs under
    ``torch.autograd.profiler.emit_nvtx(record_shapes=True)``, so every operator (backward ones
    on autograd's threads included) leaves an NVTX range with its input sizes, and the session
    names the step `SHAPE_PROBE_RANGE` instead of ``step N``. An nsys trace has no operator
    shapes otherwise, and rules need GEMM sizes (`advisor.graph.gemm_shapes`). Operator ranges
    cost host time per operator, which is why only that unmeasured step carries them.

    The probe ends at a phase mark made outside any optimizer step (`phase_mark`), not at a step
    boundary: the session starts the window at a boundary, which is usually inside torch's
    ``Optimizer.step#...`` record_function (the optimizer's post hook). Turning the operator
    ranges off there left that record_function's end without its profiler state, and torch
    printed ``state_ptr INTERNAL ASSERT FAILED ... nvtx_observer.cpp`` into the user's output on
    every run. In a plain loop the probe ends when the probe step's ``backward()`` returns (the
    GEMMs' shapes are in by then, and no operator range leaks into the window); where backward
    runs inside the optimizer step (Lightning's closure), at the window's first mark outside it
    (its first batch). It ends without the device synchronization of ``emit_nvtx``'s exit.

    While the window records, `advisor.capture.pystacks` samples the training thread's Python
    stack (``stacks``): nsys's own Python backtraces are not usable (see that module); the
    samples are written beside the export (``stacks_path``) when the window ends.
    """

    kind = "nsys"
    marks_profiler = False

    def __init__(self, stacks_path: Path | None = None) -> None:
        self.probing = False  # the step now running is the shape probe
        self.probe_ending = False  # the window has started: end the probe at the next mark
        self._probe = None  # the emit_nvtx context while it is open
        self._started = False
        self._window = False
        self.written = False
        self.error: str | None = None
        self.stacks_path = stacks_path
        self._sampler = None

    @staticmethod
    def busy() -> bool:
        return False

    def prepare(self) -> None:
        self._capture()
        try:
            probe = self._open_probe()
        except Exception:  # no operator ranges on this build: the window records without them
            return
        self._probe, self.probing = probe, True

    def _open_probe(self):
        import torch.autograd.profiler as autograd_profiler

        probe = autograd_profiler.emit_nvtx(record_shapes=True)
        probe.__enter__()
        return probe

    def _close_probe(self, probe) -> None:
        """Operator ranges off, without ``emit_nvtx.__exit__``'s device synchronization: the
        probe's GPU work may overlap the next step, as any step's does."""
        import torch.autograd.profiler as autograd_profiler

        autograd_profiler._disable_profiler()
        after = getattr(autograd_profiler, "_run_on_profiler_stop", None)  # torch >= 2.1
        if after is not None:
            after()
        probe.entered = False

    def _capture(self) -> None:
        if self._started:
            return
        import torch

        torch.cuda.synchronize()  # the capture starts with an empty GPU queue
        torch.cuda.cudart().cudaProfilerStart()
        self._started = True

    def _release(self) -> None:
        import torch

        torch.cuda.synchronize()  # the last step's GPU work lands inside the capture
        torch.cuda.cudart().cudaProfilerStop()

    @property
    def probe_open(self) -> bool:
        return self._probe is not None

    def phase_mark(self, name: str, in_optimizer: bool) -> None:
        """A phase starts (the session, while the probe is open): end the probe at the first
        mark outside an optimizer step that follows the probe step's backward (``optimizer``
        set as ``backward()`` returns) or the window's start."""
        if self._probe is not None and not in_optimizer and (name == "optimizer"
                                                              or self.probe_ending):
            self.end_probe()

    def end_probe(self) -> None:
        """End the shape probe (operator ranges off)."""
        probe, self._probe, self.probing, self.probe_ending = self._probe, None, False, False
        if probe is not None:
            self._close_probe(probe)

    def start(self) -> None:
        if self._probe is not None:
            self.probing, self.probe_ending = False, True
        self._capture()
        self._window = True
        if self.stacks_path is not None:
            from advisor.capture.pystacks import StackSampler

            self._sampler = StackSampler()
            self._sampler.start()  # the session calls start on the training thread

    def stop(self, incomplete: list[str]) -> None:
        self.end_probe()
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
        if not self._started:
            return
        self._release()
        self._started = False
        self.written = self._window  # a capture of the probe alone holds no window
        if sampler is not None and self.written:
            try:
                sampler.write(self.stacks_path)
            except OSError as e:  # the capture stands; only its source lines are lost
                print(f"advisor: could not write {self.stacks_path} ({e.strerror or e}): no "
                      "source lines for this capture", file=sys.stderr)


def rank_suffixed(path: Path, rank: int, world: int) -> Path:
    """``report.json`` for rank 0 (or a single process), ``report.rank3.json`` for rank 3."""
    if world <= 1 or rank == 0:
        return path
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")
