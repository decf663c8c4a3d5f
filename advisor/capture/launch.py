"""Multi-process jobs: `advisor profile torchrun [TORCHRUN OPTIONS] SCRIPT ARGS`.

torchrun stays the launcher; each worker it starts runs ``python -m advisor.capture [advisor
options] SCRIPT ARGS`` instead of ``python SCRIPT ARGS``, so every rank records its own window
(``trace_rank<R>.json.gz``) and writes its own analysis (``analysis_rank<R>.json``); rank 0
prints the summary. Launchers that start ``advisor profile`` themselves (``torchrun --no-python
advisor profile ...``, ``mpirun``, ``srun``) need nothing from here: the rank comes from the
environment. Under ``--try`` the trials run the same torchrun line once the job has ended, with
``--module advisor.capture.trial_child SPEC`` in place of the script (`advisor.capture.trial`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, replace

from advisor.errors import CaptureError

TORCHRUN_NAMES = ("torchrun",)
TORCHRUN_MODULES = ("torch.distributed.run",)


def is_torchrun(name: str, module: bool = False) -> bool:
    if module:
        return name in TORCHRUN_MODULES
    return os.path.basename(name) in TORCHRUN_NAMES


@dataclass(frozen=True)
class Launch:
    """A torchrun command line split: torchrun's own options, then the script and its args."""

    own: tuple[str, ...]
    script: str
    module: bool
    args: tuple[str, ...]
    nnodes: str = "1"  # torchrun's --nnodes: N or MIN:MAX

    @property
    def one_node(self) -> bool:
        return self.nnodes.strip() in ("1", "1:1")

    def launcher(self) -> list[str]:
        """torchrun with its own options, to which ``--module M ARGS`` is added: the same
        launcher line for every process advisor starts (the workers, the trials)."""
        return [sys.executable, "-m", "torch.distributed.run", *self.own]


def parse_launch(launcher_args: list[str]) -> Launch:
    """torchrun's arguments as torchrun itself parses them (one-line error where it can't)."""
    from torch.distributed.run import get_args_parser

    try:
        ns = get_args_parser().parse_args(launcher_args)
    except SystemExit as e:  # argparse already printed the usage error
        raise CaptureError("torchrun could not parse its arguments (see above)") from e
    if ns.no_python:
        raise CaptureError("advisor profile torchrun: --no-python runs no Python script to "
                           "profile; use `torchrun --no-python advisor profile ...` instead")
    script, rest = ns.training_script, list(ns.training_script_args)
    cut = len(launcher_args) - len(rest) - 1
    if cut < 0 or launcher_args[cut] != script:
        raise CaptureError("advisor profile torchrun: cannot tell torchrun's options from the "
                           "script's; put the script after all torchrun options")
    own = tuple(a for a in launcher_args[:cut] if a not in ("-m", "--module"))
    return Launch(own, script, bool(ns.module), tuple(rest), str(ns.nnodes))


def worker_command(opts, launcher_args: list[str]) -> list[str]:
    """The torchrun command line with advisor between each worker and its script."""
    job = parse_launch(launcher_args)
    target = ["-m", job.script] if job.module else [job.script]
    return [*job.launcher(), "--module", "advisor.capture", *opts.cli_args(), *target, *job.args]


def worker_options(opts):
    """The options the workers get. Under ``--try`` the job must end for the trials to start;
    ``--then stop`` ends each rank once its own window and the steps after it are timed, and
    a window that opens where each rank's step time settles (or at a time) opens at a
    different step on each rank: a rank that stops first leaves the others waiting in their
    next collective for ever. So the workers stop only where the window is pinned to a step
    (``--wait N``: every rank stops at the same step); otherwise the job runs to its own end
    (``--then continue``, the analysis beside it) and the trials follow."""
    if opts.trial is not None and opts.then == "stop" and opts.wait is None:
        return replace(opts, then="continue")
    return opts


def torchrun(opts, launcher_args: list[str]) -> int:
    from advisor.capture.background import JOB_CLAIM

    job = parse_launch(launcher_args)
    if opts.trial is not None and not job.one_node:
        # each node's advisor would start its own trials, and a node without rank 0's analysis
        # none: the others would wait at the trial's rendezvous
        raise CaptureError(f"--try runs the trials of a one-node torchrun job (--nnodes "
                           f"{job.nnodes} here): try the fixes on one node, or by hand")
    workers = worker_options(opts)
    if workers.then != opts.then and not opts.quiet:
        print("advisor: --try on a multi-process job: the job runs to its end (the window is "
              "not pinned to a step with --wait N, so the ranks would stop at different "
              "steps); the trials follow", file=sys.stderr)
    cmd = worker_command(workers, launcher_args)
    claim = opts.out / JOB_CLAIM  # set by the rank whose analysis beside the job ran the job view
    claim.unlink(missing_ok=True)
    code = subprocess.call(cmd)
    traces = sorted(p.name for p in opts.out.glob("trace_rank*.json.gz"))
    traces += sorted(p.name for p in opts.out.glob("nsys_rank*.sqlite"))
    if traces and not opts.quiet:
        print(f"advisor: per-rank traces in {opts.out}: {', '.join(traces)}; analyses: "
              "analysis_rank<R>.json", file=sys.stderr)
    if not claim.exists():  # else the job view was written while the job ran
        job_report(opts)
    if opts.trial is not None and code == 0:
        from advisor.capture.reporting import try_after_job

        try_after_job(opts, job)
    return code


def job_report(opts) -> None:
    """End with the whole job: every rank's trace analysed together (`advisor.job`), written to
    ``job.json`` and ``job.html`` beside the traces. torch.profiler traces are preferred over nsys
    exports when both were recorded (one trace per rank)."""
    from advisor.errors import AdvisorError

    traces = sorted(opts.out.glob("trace_rank*.json.gz")) or sorted(opts.out.glob("nsys_rank*.sqlite"))
    if len(traces) < 2:
        return
    from advisor.ingest.base import LoadOptions
    from advisor.job.api import analyze_job, rank_progress
    from advisor.report.emit import emit
    from advisor.report.job_report import build_job_report

    try:
        job = analyze_job(traces, load_options=LoadOptions(max_steps=30),
                          progress=rank_progress(opts.quiet))
        emit(build_job_report(job), opts.out / "job.json", opts.out / "job.html", opts.quiet)
    except AdvisorError as e:  # the script's own exit code stands; say why there is no job report
        print(f"advisor: no job report: {e}", file=sys.stderr)
