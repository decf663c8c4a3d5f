"""One trial run: ``python -m advisor.capture.trial_child SPEC.json``, started by
`advisor.capture.trial` in a fresh process per trial.

It runs the unmodified script as `advisor profile` does (`advisor.capture.script`), with the
session's step hooks but no recorder (no profiler window in a trial), the trial's knobs applied
(`advisor.capture.knobs`) and its saves redirected (`advisor.capture.scratch`). Steps are timed
by the same host clock at step boundaries; once the step time has settled (the same test that
starts `advisor profile`'s window, `advisor.capture.settle`), ``steps`` steps or ``seconds`` of
them are timed and the script is ended at a step boundary as ``--then stop`` ends it. The
result (a JSON file) holds the measured step (`advisor.capture.steptimes.measured_step`, the
statistic of `advisor profile`'s baseline), what each knob reached, and why a trial failed.

Why a separate process per trial: a knob such as torch.compile or TF32 cannot be taken back
inside one interpreter, and each trial must start as the user's job starts (imports, workers,
allocator), so that plain and fixed runs differ only by the knob.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from advisor.capture import session
from advisor.capture.capture_state import StopAfterWindow, WindowPlan
from advisor.capture.knobs import KnobApplier
from advisor.capture.scratch import Scratch
from advisor.capture.session import Session
from advisor.capture.settle import SETTLE_MAX_WAIT
from advisor.capture.steptimes import MIN_MEASURED_STEPS, StepClock, measured_step
from advisor.engine.knobs import parse_knob


class TrialSession(Session):
    """The session's hooks without a window: it applies the knobs to the top-level modules it
    finds, and ends the script once the trial's settled steps are timed.

    One rank of a multi-process trial (``world`` > 1) cannot stop where its own step time
    settled, nor after a time: ranks settle at different steps, and a rank that leaves while
    the others enter their next collective leaves them waiting for ever. Every rank therefore
    stops after the same step index, known to all without talking: ``SETTLE_MAX_WAIT + steps``
    (settling is forced by step `SETTLE_MAX_WAIT`, so each rank has timed at least ``steps``
    settled steps by then), and epochs are counted from step `SETTLE_MAX_WAIT` on, where every
    rank of a data-parallel job has drawn the same batches. ``--try-time`` does not end such a
    trial. A collective to agree on the stop (rank 0 deciding) would add a host sync to every
    timed step of the job being timed."""

    def __init__(self, applier: KnobApplier, steps: int, seconds: float, epochs: int,
                 world: int = 1) -> None:
        super().__init__(WindowPlan(), None)
        self.follow_profiler = False  # a trial records nothing: no marks into a profiler
        self.applier = applier
        self.limit_steps, self.limit_s, self.min_epochs = steps, seconds, epochs
        self.world = world
        self.stop_index = SETTLE_MAX_WAIT + steps if world > 1 else None
        self.settled_clock: int | None = None
        self.stopped_at: int | None = None  # the step after which the trial ended the script
        self.counting = False  # DataLoader iterators are counted as epochs from here on
        self._starts: dict[int, int] = {}  # id(DataLoader) -> iterators started after settling

    @property
    def epochs(self) -> int:
        """Epoch boundaries crossed after settling: the most iterators any one DataLoader
        started (an evaluation loader's own passes do not add to the training loader's)."""
        return max(self._starts.values(), default=0)

    def _end_discovery(self) -> None:
        found = [] if self.depth else list(self.top.values())
        super()._end_discovery()
        if not self.discovering and found:
            self.applier.top_modules(found)

    def boundary(self) -> None:
        super().boundary()
        self._check()

    def explicit_step_exit(self, complete: bool) -> None:
        super().explicit_step_exit(complete)
        if complete:
            self._check()

    def _check(self) -> None:
        st = self.state
        if self._stop_raised or not st.step_times:
            return
        now, last = self.clock(), st.step_times[-1][0]
        # the test that opens `advisor profile`'s window: the step time, the data wait and the
        # loader's prefetched batches (`Session._settled_why`), or SETTLE_MAX_WAIT steps
        if st.settled_at is None and self._settled_why(last) is not None:
            st.settled_at = last
            self.settled_clock = now
            if self.stop_index is None:
                self._starts.clear()
                self.counting = True
        if self.stop_index is not None:  # every rank: the same step, whatever its clock says
            if not self.counting and last >= SETTLE_MAX_WAIT:
                self._starts.clear()
                self.counting = True
            if last >= self.stop_index and self.epochs >= self.min_epochs:
                self._stop(last)
            return
        if st.settled_at is None or st.settled_at == last:
            return
        timed = sum(1 for i, _, _ in st.step_times if i > st.settled_at)
        enough = timed >= self.limit_steps and self.epochs >= self.min_epochs
        if enough or (now - (self.settled_clock or now)) >= self.limit_s * 1e9:
            self._stop(last)

    def _stop(self, last: int) -> None:
        self._stop_raised = True
        self.state.stopped_after_window = True
        self.stopped_at = last
        raise StopAfterWindow("advisor: the trial's steps are timed")

    def count_epochs(self) -> None:
        """Count DataLoader iterators started on the loop thread (epochs) after settling."""
        from torch.utils.data import DataLoader

        orig, s = DataLoader.__iter__, self

        def __iter__(loader):
            if threading.get_ident() == s.tid and s.counting:
                s._starts[id(loader)] = s._starts.get(id(loader), 0) + 1
            return orig(loader)

        __iter__.__wrapped__ = orig  # type: ignore[attr-defined]
        DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
        self.hooks.on_uninstall(lambda: setattr(DataLoader, "__iter__", orig))


class LossWatch:
    """Keeps the last scalar handed to ``torch.autograd.backward`` (the loss, where the script
    calls ``loss.backward()``), without reading it: no host sync in the timed steps. It is
    read once, after the trial, to tell a run that diverged (NaN/inf) from one that trained."""

    def __init__(self) -> None:
        self.last: Any = None
        self.seen = 0
        self._undo: Any = None

    def install(self) -> None:
        import torch

        autograd, orig = torch.autograd, torch.autograd.backward
        watch = self

        def backward(tensors, *args, **kwargs):
            t = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            if isinstance(t, torch.Tensor) and t.numel() == 1 and t.is_floating_point():
                watch.last = t.detach()
                watch.seen += 1
            return orig(tensors, *args, **kwargs)

        backward.__wrapped__ = orig  # type: ignore[attr-defined]
        autograd.backward = backward
        self._undo = lambda: setattr(autograd, "backward", orig)

    def finite(self) -> bool | None:
        if self.last is None:
            return None
        import torch

        return bool(torch.isfinite(self.last.float()).all().item())

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()


OUT_OF_MEMORY = ("out of memory", "can't allocate memory", "cannot allocate memory",
                 "not enough memory")
"""How allocators word a refused allocation: CUDA's caching allocator (``torch.OutOfMemoryError``,
"CUDA out of memory"), PyTorch's CPU allocator ("DefaultCPUAllocator: can't allocate memory ...
Error code 12 (Cannot allocate memory)"), older CPU builds ("not enough memory")."""


def _reason(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    low = text.lower()
    if "OutOfMemory" in name or isinstance(e, MemoryError) or any(m in low for m in OUT_OF_MEMORY):
        return f"out of memory ({name}: {text[:200]})"
    return f"{name}: {text[:300]}" if text else name


def run_trial(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script once as the spec says; the result as a dict (also written to the spec's
    ``result`` path by `main`)."""
    from advisor.capture import script
    from advisor.capture.options import detect_rank

    rank = detect_rank()
    knobs = [parse_knob(k) for k in spec.get("knobs", [])]
    scratch = Scratch(Path(spec["scratch"]))
    applier = KnobApplier(knobs, output_dir=lambda p: scratch.path(p, "output", folder=True),
                          save_path=scratch.path)
    sess = TrialSession(applier, int(spec["steps"]), float(spec["seconds"]),
                        int(spec.get("epochs", 0)), rank.world)
    loss = LossWatch()
    raised: list[BaseException] = []
    shown = script._print_exception

    def record(e: BaseException, origin: str | None) -> None:
        raised.append(e)
        shown(e, origin)

    script._print_exception = record  # type: ignore[assignment]
    t0 = time.monotonic()
    scratch.install()
    applier.install()
    sess.install()
    session.activate(sess)  # advisor.capture.step()/phase() in the script reach this session
    if spec.get("epochs"):
        sess.count_epochs()
    loss.install()
    try:
        code = script.run(script.Target(spec["script"], module=bool(spec.get("module"))),
                          list(spec.get("args", [])))
        if sess.state.stopped_after_window:
            _leave_process_group()
    finally:
        try:
            sess.finish()
        finally:
            session.activate(None)
            loss.uninstall()
            applier.uninstall()
            scratch.uninstall()
            script._print_exception = shown  # type: ignore[assignment]
    ended = time.time()
    out = _result(spec, sess, applier, scratch, loss, code, raised, time.monotonic() - t0)
    # when the script ended: of the ranks that failed, the first to end is the cause (the
    # others fail after it, in a collective it left: `advisor.capture.trial.job_result`)
    return {**out, "rank": rank.rank, "world": rank.world, "stopped_at": sess.stopped_at,
            "ended_unix": ended}


def _leave_process_group() -> None:
    """The trial ended the script between two steps, where the script's own
    ``destroy_process_group`` never comes: leave the group here, as every rank stopped after
    the same step (`TrialSession`) and no collective is pending. Best effort: the result is
    what matters, and the process exits next."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # a group that cannot be left is left to the exit
        pass


def _result(spec: dict[str, Any], sess: TrialSession, applier: KnobApplier, scratch: Scratch,
            loss: LossWatch, code: int, raised: list[BaseException], wall_s: float) -> dict[str, Any]:
    st = sess.state
    # the data waits too: a far-out step that waited for its batch stays in the mean, as in
    # `advisor profile`'s baseline (`steptimes._input_burst`)
    clock = StepClock(tuple((i, b, e) for i, b, e in st.step_times), None, st.settled_at,
                      {int(k): dict(v) for k, v in st.activity.items()})
    m = measured_step(clock) if st.settled_at is not None else None
    steady = [ns for _, ns in clock.steady_candidates()] if st.settled_at is not None else []
    finite = loss.finite()
    reason = None
    if raised and not st.stopped_after_window:
        reason = _reason(raised[-1])
    elif code != 0 and not st.stopped_after_window:
        reason = f"the script exited with {code}"
    elif spec.get("knobs") and not applier.applied:
        reason = ("the knob reached nothing in this script: " + "; ".join(applier.passed_over)
                  if applier.passed_over else
                  "the knob reached nothing in this script (no DataLoader, top-level module or "
                  "framework it applies to was seen)")
    elif finite is False:
        reason = "the loss was NaN or inf at the end of the trial"
    elif m is None:
        reason = (f"only {len(steady)} settled step(s) were timed ({MIN_MEASURED_STEPS} needed): "
                  "the script ended first; give it more steps, or a longer --try-time")
    return {
        "status": "failed" if reason else "ok",
        "reason": reason,
        "exit_code": code,
        "stopped": st.stopped_after_window,
        "knobs": list(spec.get("knobs", [])),
        "applied": list(applier.applied),
        "passed_over": list(applier.passed_over),
        "redirected": sorted(set(scratch.moved.values())),
        "settled_at": st.settled_at,
        "steps_timed": m.count if m else len(steady),
        "mean_ns": m.mean_ns if m else None,
        "median_ns": m.median_ns if m else None,
        "stdev_ns": m.stdev_ns if m else None,
        # wall time per step with the slow ones (epoch boundaries, checkpoints) kept in
        "run_mean_ns": sum(steady) / len(steady) if steady else None,
        "epochs": sess.epochs,
        "loss_seen": loss.seen,
        "loss_finite": finite,
        "wall_s": round(wall_s, 3),
        # every step's host-clock time (index, ms): the evidence behind the mean, to read a
        # trial against the script's own log
        "steps_ms": [[i, round((e - b) / 1e6, 3)] for i, b, e in st.step_times],
        # the settled steps the mean is taken over, in order: `advisor gate`'s step-time sample
        "settled_ms": ([round((e - b) / 1e6, 4) for i, b, e in st.step_times if i in set(m.steps)]
                       if m else []),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m advisor.capture.trial_child SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    result = run_trial(spec)
    from advisor.capture.background import write_json_atomic

    path = Path(spec["result"])
    if spec.get("per_rank"):  # under the job's launcher, every rank its own result:
        # `advisor.capture.trial.rank_path` (not from RANK alone: a process that inherited a
        # launcher's environment writes where its single-process runner reads)
        from advisor.capture.trial import rank_path

        path = rank_path(path, result["rank"])
    write_json_atomic(path, result)
    # a failed rank exits non-zero: torchrun then ends the other ranks, which may wait for it
    # in a collective
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
