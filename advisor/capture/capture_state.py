"""What a capture session is told (`WindowPlan`) and what it saw (`CaptureState`).

Plain data, kept apart from the session that fills it (`advisor.capture.session`): the state
is written to the status file, handed to the analysis beside the job and read back by the
step clock (`advisor.capture.steptimes.StepClock.from_state`), none of which needs torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
