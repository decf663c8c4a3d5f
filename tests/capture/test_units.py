"""The pieces of `advisor profile` that need no script run: ranks, names, launch commands."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.capture.options import ProfileOptions, Rank, detect_rank
from advisor.capture.reporting import why_nothing
from advisor.capture.script import Target, exit_code_of
from advisor.capture.window import rank_suffixed
from advisor.errors import CaptureError


@pytest.mark.parametrize(("env", "rank"), [
    ({}, Rank(0, 1)),
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}, Rank(3, 8)),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, Rank(1, 2)),
    ({"PMI_RANK": "2", "PMI_SIZE": "4"}, Rank(2, 4)),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, Rank(0, 1)),
    ({"RANK": "x", "SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, Rank(5, 6)),
])
def test_rank_comes_from_the_launcher_environment(env, rank):
    assert detect_rank(env) == rank


def test_reports_of_other_ranks_get_the_rank_in_their_name():
    p = Path("out/report.json")
    assert rank_suffixed(p, 0, 4) == p
    assert rank_suffixed(p, 3, 4) == Path("out/report.rank3.json")
    assert rank_suffixed(p, 0, 1) == p


@pytest.mark.parametrize(("code", "expected"), [(None, 0), (0, 0), (3, 3), (True, 1), (False, 0)])
def test_exit_code_follows_python(code, expected):
    assert exit_code_of(code) == expected


def test_exit_with_a_message_prints_it_and_gives_1(capsys):
    assert exit_code_of("bad config") == 1
    assert capsys.readouterr().err == "bad config\n"


def test_missing_targets_fail_before_running(tmp_path):
    with pytest.raises(CaptureError, match="can't open file"):
        Target(str(tmp_path / "nope.py")).check()
    with pytest.raises(CaptureError, match="No module named"):
        Target("advisor_no_such_module_xyz", module=True).check()
    with pytest.raises(CaptureError, match="__main__"):
        Target(str(tmp_path)).check()


def test_why_nothing_names_the_cause():
    opts = ProfileOptions(wait=5, steps=10)
    assert "never called optimizer.step()" in why_nothing(opts, [], False, 0, None, None)
    assert "ran 3 complete steps, fewer than the 6" in why_nothing(opts, [0, 1, 2], False, 4,
                                                                    None, None)
    assert "nothing was recorded: boom" in why_nothing(opts, [0], False, 1, None, "boom")


def test_torchrun_workers_run_advisor_before_the_script():
    pytest.importorskip("torch")
    from advisor.capture.launch import is_torchrun, worker_command

    opts = ProfileOptions(wait=2, steps=3, out=Path("o"), quiet=True)
    cmd = worker_command(opts, ["--nproc-per-node", "2", "train.py", "--lr", "1", "-m", "x"])
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    i = cmd.index("--module")
    assert cmd[1:i] == ["-m", "torch.distributed.run", "--nproc-per-node", "2"]
    # the launcher's --then reaches every worker (their stdin is no terminal to decide by)
    assert cmd[i + 1:] == ["advisor.capture", "--wait", "2", "--steps", "3", "--out", "o",
                           "--then", "continue", "--quiet", "--stacks", "train.py", "--lr", "1", "-m", "x"]
    mod = worker_command(opts, ["--nproc-per-node", "2", "-m", "pkg.train", "--lr", "1"])
    assert mod[mod.index("--module"):][-4:] == ["-m", "pkg.train", "--lr", "1"]
    assert is_torchrun("/usr/bin/torchrun") and is_torchrun("torch.distributed.run", module=True)
    assert not is_torchrun("train.py")
    with pytest.raises(CaptureError, match="--no-python"):
        worker_command(opts, ["--no-python", "advisor", "profile", "x.py"])


def test_nsys_child_runs_advisor_under_nsys_with_the_same_window():
    from advisor.capture.nsys import child_command, profile_command

    opts = ProfileOptions(wait=4, steps=7, out=Path("o"))
    child = child_command(opts, Target("train.py"), ["--lr", "1"])
    assert child[:4] == [sys.executable, "-m", "advisor.capture", "--nsys-child"]
    assert child[-3:] == ["train.py", "--lr", "1"]
    assert "--stacks" in child  # told to sample Python stacks (advisor.capture.pystacks)
    no_stacks = ProfileOptions(wait=4, steps=7, out=Path("o"), stacks=False)
    assert "--no-stacks" in child_command(no_stacks, Target("train.py"), [])
    cmd = profile_command("nsys", Path("o/nsys_rank0"), child)
    assert cmd[:2] == ["nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert cmd[cmd.index("-o") + 1] == "o/nsys_rank0"
    # what the analysis reads, and no more (each traced API costs the whole run: docs/profile.md)
    assert cmd[cmd.index("-t") + 1] == opts.nsys_trace == "cuda,nvtx"
    wide = profile_command("nsys", Path("o/nsys_rank0"), child, "cuda,nvtx,osrt")
    assert wide[wide.index("-t") + 1] == "cuda,nvtx,osrt" and wide.count("-t") == 1


def test_nsys_trace_option_reaches_every_rank():
    opts = ProfileOptions(nsys=True, nsys_trace="cuda,nvtx,osrt,cublas,cudnn")
    args = opts.cli_args()
    assert args[args.index("--nsys-trace") + 1] == "cuda,nvtx,osrt,cublas,cudnn"


def test_nsys_options_reach_every_rank_and_replace_ours_of_the_same_name():
    from advisor.capture.nsys import PROFILE_FLAGS, profile_command

    opts = ProfileOptions(nsys=True, nsys_options=("--sample=process-tree",
                                                   "--python-backtrace=cuda"))
    args = opts.cli_args()
    assert "--nsys-option=--sample=process-tree" in args
    assert "--nsys-option=--python-backtrace=cuda" in args
    cmd = profile_command("nsys", Path("o/nsys_rank0"), ["python", "train.py"], "cuda,nvtx",
                          opts.nsys_options)
    # nsys refuses an option given twice ("Option '--sample' cannot be specified more than once")
    assert [c for c in cmd if c.startswith("--sample")] == ["--sample=process-tree"]
    assert "--python-backtrace=cuda" in cmd and "--cpuctxsw=none" in cmd
    assert cmd[-2:] == ["python", "train.py"]
    assert "--sample=none" in PROFILE_FLAGS


def test_python_stacks_default_on_with_torch_profiler_and_off_under_nsys():
    from advisor.capture.options import stacks_for

    assert stacks_for(None, nsys=False) is True  # with_stack: calibrated, removed from estimates
    assert stacks_for(None, nsys=True) is False  # advisor's own sampler: not calibrated yet
    assert stacks_for(True, nsys=True) is True and stacks_for(False, nsys=False) is False
    # the choice reaches the ranks and the nsys child explicitly, whatever their defaults
    assert "--stacks" in ProfileOptions(stacks=True).cli_args()
    assert "--no-stacks" in ProfileOptions(stacks=False).cli_args()
