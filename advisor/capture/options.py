"""What `advisor profile` was asked to do (`ProfileOptions`), which process of the job this is
(`Rank`), and the capture status file the processes of one run read: the plain data every part
of the capture shares, below all of them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.capture.script import Target

DEFAULT_TRACE = "cuda,nvtx"
"""What nsys traces by default (`advisor profile --nsys-trace` changes it): what the analysis
reads. nsys intercepts the traced APIs for the whole run, not only inside the capture range, and
OS-runtime, cuBLAS and cuDNN tracing cost the job without feeding any rule: on the H100, nanoGPT's
steps outside the window ran 28.6 ms with ``cuda,nvtx,osrt,cublas,cudnn`` and 25.0 ms with
``cuda,nvtx``, against 23.8 ms without nsys (HF Trainer 12.2 vs 11.5 ms, Lightning 4.45 vs 4.00;
fixtures/archive/unprofiled/h100-2026-11-23b, docs/validation.md)."""

STATUS_NAME = "capture_rank{rank}.json"


@dataclass
class ProfileOptions:
    wait: int | None = None  # None: start recording once the step time has settled
    steps: int = 10
    out: Path = Path("advisor-out")
    json_out: Path | None = None
    html_out: Path | None = None
    nsys: bool = False
    quiet: bool = False
    nsys_child: bool = False  # internal: running under `nsys profile` started by the parent
    extra_notes: list[str] = field(default_factory=list)
    select: tuple[str, ...] = ()  # rule selection and options, as `advisor analyze` takes them
    ignore: tuple[str, ...] = ()
    rule_option: tuple[str, ...] = ()
    isolated: bool = False
    show_fixes: bool = False
    stacks: bool = True  # torch.profiler records Python stacks in the window (source lines)
    nsys_trace: str = DEFAULT_TRACE  # nsys -t (with --nsys)
    nsys_options: tuple[str, ...] = ()  # more `nsys profile` options (with --nsys)
    source_root: Path | None = None  # the script's directory: where reports read its lines
    window_at_s: float | None = None  # --window-at TIME: start recording then
    then: str = "continue"  # after the window: "continue" (analysis beside the job) or "stop"
    # --try: the fixes to try after the analysis (`advisor.capture.trial.TrialOptions`), and
    # the script with its arguments, to run again
    trial: Any = None
    trial_target: tuple[Target, list[str]] | None = None
    trial_cwd: str | None = None  # where the script started: trials start there too (a script
    # may os.chdir, as Hydra's do, and its relative paths are the profiled run's)

    def cli_args(self) -> list[str]:
        """These options as `advisor profile` arguments (for the processes we start)."""
        args = ["--wait", str(self.wait)] if self.wait is not None else []
        if self.window_at_s is not None:
            args += ["--window-at", f"{self.window_at_s:g}s"]
        args += ["--steps", str(self.steps), "--out", str(self.out), "--then", self.then]
        if self.json_out:
            args += ["--json", str(self.json_out)]
        if self.html_out:
            args += ["--html", str(self.html_out)]
        if self.nsys:
            args += ["--nsys", "--nsys-trace", self.nsys_trace]
            for option in self.nsys_options:
                args.append(f"--nsys-option={option}")
        if self.quiet:
            args.append("--quiet")
        for flag, values in (("--select", self.select), ("--ignore", self.ignore),
                             ("--rule-option", self.rule_option)):
            for value in values:
                args += [flag, value]
        if self.isolated:
            args.append("--isolated")
        if self.show_fixes:
            args.append("--show-fixes")
        args.append("--stacks" if self.stacks else "--no-stacks")  # explicit: the default
        # depends on the profiler (`advisor.commands.profile`)
        return args


@dataclass(frozen=True)
class Rank:
    rank: int = 0
    world: int = 1

    @property
    def tag(self) -> str:
        return f"rank{self.rank}"

    @property
    def prints(self) -> bool:
        """Only rank 0 of a multi-process job talks on the console."""
        return self.rank == 0


_RANK_VARS = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


def detect_rank(env: Mapping[str, str] | None = None) -> Rank:
    """This process's rank from the launcher's environment (torchrun, Open MPI, PMI, Slurm)."""
    env = os.environ if env is None else env
    for rank_var, size_var in _RANK_VARS:
        if rank_var in env:
            try:
                return Rank(int(env[rank_var]), int(env.get(size_var, "1") or 1))
            except ValueError:
                continue
    return Rank()


def write_status(out: Path, rank: Rank, code: int | None, state) -> None:
    """The nsys child's state for the parent (``exit_code`` None: the job still runs)."""
    from advisor.capture.background import write_json_atomic

    status = {"exit_code": code, "rank": rank.rank, "world": rank.world, **asdict(state)}
    write_json_atomic(out / STATUS_NAME.format(rank=rank.rank), status)


def stacks_for(asked: bool | None, nsys: bool) -> bool:
    """Whether the window records Python stacks: as asked, else on with torch.profiler (its
    with_stack cost is calibrated and removed from the estimates) and off under nsys. There
    advisor samples the stacks itself, which cost nanoGPT's launch-bound step 3.1 ms inside the
    window on the H100 (18.3 against 15.2 ms; docs/profile.md) and which no calibration removes
    yet: on by default, it moved the CUDA-graph estimate from 1.34x to 1.53x."""
    return (not nsys) if asked is None else asked
