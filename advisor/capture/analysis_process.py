"""The analysis process beside the running job (`advisor.capture.background` says why and how
the two talk): read the trace and run the rules once, write the reports as soon as the measured
steps are in, keep them current until the job ends, and in a multi-process job let the rank that
completes the set run the job view.

Started by `advisor.capture.background.BackgroundAnalysis` as
``python -m advisor.capture.analysis_process HANDOFF_JSON``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.capture.background import (
    JOB_CLAIM,
    POLL_S,
    STATUS,
    STEPS,
    WAIT_FOR_MEASURED_S,
    process_alive,
    put_status,
    read_json,
    step_aside,
    step_back_when_done,
)

if TYPE_CHECKING:
    from advisor.analysis import Analysis, AnalysisInput


class _Passes:
    """The rules' passes over the window, one per calibration: each report puts the newest
    measured steps into the inputs (`advisor.capture.baseline.measured_inputs`) before
    analysing, and only a calibration not seen before (fitted to those steps) runs the rules
    again; the pass is a function of the inputs, so one already run is reused as is."""

    def __init__(self, inputs: AnalysisInput, progress: Any) -> None:
        from advisor.analysis import rule_pass_shown

        self.inputs = inputs  # the replayed baseline: the steps are measured into a copy
        # the calibrated costs' pass runs now, while the job measures its steps after the window
        self.by_calibration = {inputs.calibration: rule_pass_shown(inputs, progress)}

    def analysis(self, state: dict) -> Analysis:
        from advisor.analysis import analyze_input, rule_pass
        from advisor.capture.baseline import measured_inputs
        from advisor.capture.steptimes import StepClock

        inputs = measured_inputs(self.inputs, StepClock.from_state(state))
        ruled = self.by_calibration.get(inputs.calibration)
        if ruled is None:
            ruled = self.by_calibration[inputs.calibration] = rule_pass(inputs)
        return analyze_input(inputs, ruled)


def _progress(talk: bool):
    """Each stage's closing line on a terminal (``✓ read ...``, ``✓ rules: ...``), no spinner:
    a spinner redrawn from beside the job would write over the job's own output."""
    from contextlib import contextmanager

    from rich.markup import escape

    from advisor.report.progress import Progress, Stage

    class StageLines(Progress):
        @contextmanager
        def stage(self, doing: str):
            stage, start = Stage(doing), time.perf_counter()
            yield stage
            if self._console is not None:
                self._console.print(f"[green]✓[/] {escape(stage.result or doing)} "
                                    f"[dim]({time.perf_counter() - start:.1f} s)[/]",
                                    markup=True, highlight=False)

    return StageLines(talk and sys.stderr.isatty())


def _options(h: dict):
    from advisor.capture.options import ProfileOptions

    o = h["options"]
    return ProfileOptions(
        out=Path(o["out"]), json_out=Path(o["json_out"]) if o["json_out"] else None,
        html_out=Path(o["html_out"]) if o["html_out"] else None, quiet=o["quiet"],
        show_fixes=o["show_fixes"], select=tuple(o["select"]), ignore=tuple(o["ignore"]),
        rule_option=tuple(o["rule_option"]), isolated=o["isolated"], steps=o["steps"],
        source_root=Path(o["source_root"]) if o.get("source_root") else None)


def _render(passes: _Passes, state: dict, opts, rank, talk: bool) -> int | None:
    from advisor.capture.reporting import render

    analysis = passes.analysis(state)
    render(analysis, opts, rank, talk)
    return analysis.measured.count if analysis.measured is not None else None


def run_analysis(handoff_path: Path) -> int:
    """The analysis process: analyse once, report, keep the reports current until the job ends."""
    from advisor.capture.options import Rank
    from advisor.errors import AdvisorError

    step_aside()
    h = read_json(handoff_path)
    if h is None:  # the job removed or replaced --out before this process started: no report
        return 1
    opts, rank = _options(h), Rank(h["rank"], h["world"])
    tag = rank.tag
    steps_path = opts.out / STEPS.format(tag=tag)
    step_back_when_done(int(h["job_pid"]), steps_path)
    status_path = opts.out / STATUS.format(tag=tag)
    status: dict[str, Any] = {"pid": os.getpid(), "state": "running", "started": time.time(),
                              "trace": h["trace"]}
    put_status(status_path, status)
    talk = not opts.quiet and rank.prints
    try:
        return _analyse_and_report(h, opts, rank, status, status_path, steps_path, talk)
    except AdvisorError as e:
        from advisor.safe_text import plain

        status.update(state="failed", error=plain(e), finished=time.time())
    except Exception as e:  # a bug: its traceback on stderr, the job told why there is no report
        import traceback

        traceback.print_exc()
        status.update(state="failed", finished=time.time(),
                      error=f"internal error in the analysis ({type(e).__name__}: {e})")
    put_status(status_path, status)
    return 1


def _analyse_and_report(h: dict, opts, rank, status: dict, status_path: Path, steps_path: Path,
                        talk: bool) -> int:
    from advisor.capture.reporting import recorded_inputs
    from advisor.engine.host import HostFacts

    # what the session recorded about the host and the script (cores, the loader, imported
    # frameworks), as the in-process analysis passes it: without it a rule falls back to its
    # stated assumption ("the host has 8 cores ...") although the job's own figure is known
    facts = HostFacts.from_state(h["state"]) if h.get("state") else None
    progress = _progress(talk)
    passes = _Passes(recorded_inputs(Path(h["trace"]), h["recorded"], opts, progress, facts),
                     progress)
    status["analysed"] = time.time()
    job_pid = int(h["job_pid"])
    seen: str | None = None  # sequence tag of the steps file last applied
    reported = False
    deadline = time.time() + WAIT_FOR_MEASURED_S
    while True:
        steps = read_json(steps_path) if steps_path.exists() else None
        seq = steps.get("seq") if steps is not None else None
        alive = process_alive(job_pid)
        final = bool(steps and steps.get("final"))
        fresh = steps is not None and seq != seen
        if fresh or (not reported and (not alive or time.time() > deadline)):
            state = steps["state"] if steps is not None else h["state"]
            # The summary shows at the first report and again, complete, when the job ends
            # (measured steps and the whole run; a long job's output has buried the first).
            if reported and final and talk:
                print("advisor: the job ended; the report with the whole run:", file=sys.stderr,
                      flush=True)
            measured = _render(passes, state, opts, rank,
                               talk and (not reported or final))
            if reported and talk:
                what = "the whole run" if final else f"{measured or 0} measured steps"
                print(f"advisor: reports updated with {what} ({opts.out})", file=sys.stderr,
                      flush=True)
            seen = seq
            now = time.time()
            status.update(state="done" if final or not alive else "reported",
                          measured_steps=measured, whole_run=final)
            status.setdefault("reported", now)
            status["updated"] = now
            put_status(status_path, status)
            if not reported and talk:
                print(f"advisor: trace {h['trace']}; {len(h['recorded'])} steps recorded"
                      + ("" if final or not alive else "; reports written while the job runs on"),
                      file=sys.stderr, flush=True)
            if not reported and rank.world > 1:
                _job_view(opts, rank)
            reported = True
        if final or not alive:
            if not final and reported and status["state"] != "done":
                status["state"] = "done"
                put_status(status_path, status)
            return 0
        time.sleep(POLL_S)


def _job_view(opts, rank) -> None:
    """The rank that completes the set of per-rank reports runs the job view, once."""
    done = 0
    for r in range(rank.world):
        st = read_json(opts.out / STATUS.format(tag=f"rank{r}")) or {}
        done += st.get("state") in ("reported", "done")
    if done < rank.world:
        return
    try:
        fd = os.open(opts.out / JOB_CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    from advisor.capture.launch import job_report

    job_report(opts)


def main(argv: list[str]) -> int:
    for name in ("stdout", "stderr"):  # started after the job closed its own: nowhere to talk
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - lives as long as sys's
    if len(argv) != 1:
        print("usage: python -m advisor.capture.analysis_process HANDOFF_JSON", file=sys.stderr)
        return 2
    return run_analysis(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
