"""The 2-GPU DDP validation's one command, run on the CPU build with gloo (2 processes): the
script's logic (variants, timing, per-rank traces, nsys mode, packing, the parse) works before a
2-GPU machine is spent on it. gloo has no NCCL kernels, so no job finding is expected here."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

SCENARIO = ROOT / "benchmarks" / "scenarios" / "ddp-job"
TINY = ("--dim 64 --layers 2 --heads 2 --seq 32 --vocab 512 --batch 2 --work 5 --workers 1 "
        "--warmup 2 --timed 3 --profiled 3")


def test_run_script_on_gloo_then_parse(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, DEVICE="cpu", OUT=str(out), SIZE_ARGS=TINY,
               VARIANTS="slow-rank,slow-rank-fixed")
    bin_dir = os.path.dirname(sys.executable)  # torchrun of this environment
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    run = subprocess.run(["bash", str(SCENARIO / "run_h200x2.sh")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["ddp-validation.tgz.part-00"]
    parse = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validate_job.py"), str(out),
                            "--workers", "1"], capture_output=True, text=True, timeout=600)
    assert parse.returncode == 0, parse.stderr[-2000:]
    rows = [line for line in parse.stdout.splitlines() if line.startswith("| ")]
    variants = [r.split("|")[1].strip() for r in rows]
    for v in ("slow-rank", "slow-rank-fixed"):
        assert v in variants
    assert "| slow-rank -> slow-rank-fixed | straggler-rank | torch.profiler |" in parse.stdout
    # each variant's job step is read from both ranks' traces
    assert "2 ranks on cpu" in parse.stdout


def test_nsys_mode_runs_the_named_steps_on_gloo(tmp_path):
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        ["torchrun", "--standalone", "--nproc_per_node=2", str(SCENARIO / "train_ddp.py"),
         "--out", str(tmp_path), "--device", "cpu", "--variants", "accum-nosync",
         "--capture", "nsys", *TINY.split(), "--timed", "0"],
        env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not list(tmp_path.rglob("*.json*"))  # no torch.profiler trace in this mode
