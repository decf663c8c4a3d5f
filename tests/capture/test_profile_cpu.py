"""`advisor profile` end to end on the CPU: real (tiny) training scripts, run unmodified.

Each script in ``scripts/`` is a real PyTorch loop. The CPU build of torch records CPU-only
traces, so these tests check the capture itself (steps, phases, streams, exit codes,
tracebacks); the GPU side is validated on the H100 (docs/profile.md).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_GUARD_S

torch = pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from click.testing import CliRunner  # noqa: E402

from advisor.cli import cli  # noqa: E402
from advisor.errors import CaptureError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
PHASES = ["data", "forward", "loss", "backward", "optimizer"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def advisor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor.cli", *args], capture_output=True,
                          text=True, env=_env(), cwd=cwd, timeout=HANG_GUARD_S)


def python(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(),
                          cwd=cwd, timeout=HANG_GUARD_S)


def script_traceback(stderr: str) -> str:
    """The Python traceback block of a stderr (Kineto may log lines around it)."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return "\n".join(lines[start:end + 1])


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp")
    done = advisor("profile", "--wait", "3", "--steps", "6", "--out", str(out),
                   "--json", str(out / "report.json"),
                   str(SCRIPTS / "train_mlp.py"), "--iters", "24")
    return done, out


def test_script_output_and_exit_code_are_its_own(mlp_run):
    done, _ = mlp_run
    plain = python(str(SCRIPTS / "train_mlp.py"), "--iters", "24")
    assert done.returncode == plain.returncode == 0, done.stderr
    assert done.stdout == plain.stdout  # advisor writes nothing to the script's stdout
    assert "train_mlp: done 24 iterations, argv=['--iters', '24']" in done.stdout


def test_recorded_window_is_analysed_with_every_phase(mlp_run):
    done, out = mlp_run
    report = json.loads((out / "report.json").read_text())
    assert report["steps"]["count"] == 6  # exactly the recorded window
    assert report["steps"]["source"] == "ranges"
    assert list(report["steps"]["phases"]) == PHASES
    assert report["trace"]["has_gpu_work"] is False
    assert json.loads((out / "analysis_rank0.json").read_text())["steps"]["count"] == 6
    assert "Steps: 6 found" in done.stderr  # the summary goes to stderr


def test_trace_names_steps_from_the_window(mlp_run):
    _, out = mlp_run
    with gzip.open(out / "trace_rank0.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = sorted(e["name"] for e in events
                   if e.get("cat") == "user_annotation" and e["name"].startswith("step "))
    assert steps == [f"step {n}" for n in range(3, 9)]


def test_script_that_raises_shows_its_own_traceback_and_keeps_complete_steps(tmp_path):
    script = SCRIPTS / "raises.py"
    done = advisor("profile", "--wait", "2", "--steps", "10", "--out", str(tmp_path),
                   "--json", str(tmp_path / "r.json"), str(script))
    plain = python(str(script))
    assert done.returncode == plain.returncode == 1
    assert done.stdout == plain.stdout
    tb = script_traceback(done.stderr)
    assert tb == script_traceback(plain.stderr)
    assert "advisor" not in tb and "runpy" not in tb
    assert tb.endswith("ValueError: loss went wrong at iteration 7")
    # Iteration 7 is step 6 (a step ends at optimizer.step()): steps 2-5 completed in the window.
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps"]["count"] == 4
    with gzip.open(tmp_path / "trace_rank0.json.gz", "rt") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert "step 6 (incomplete)" in names and "step 6" not in names


def test_sys_exit_code_is_preserved_and_steps_still_analysed(tmp_path):
    done = advisor("profile", "--wait", "2", "--steps", "5", "--out", str(tmp_path),
                   "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"),
                   str(SCRIPTS / "exits.py"))
    assert done.returncode == 3
    assert done.stdout == "exits: leaving with 3\n"
    assert json.loads((tmp_path / "r.json").read_text())["steps"]["count"] == 5
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_public_api_marks_a_loop_without_optimizer(tmp_path):
    done = advisor("profile", "--wait", "2", "--steps", "8", "--out", str(tmp_path),
                   "--json", str(tmp_path / "r.json"), str(SCRIPTS / "custom_loop.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "custom_loop: done\n"
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps"]["count"] == 8
    assert list(report["steps"]["phases"]) == PHASES


def test_two_optimizers_make_one_step_per_iteration(tmp_path):
    done = advisor("profile", "--wait", "2", "--steps", "5", "--out", str(tmp_path),
                   "--json", str(tmp_path / "r.json"), str(SCRIPTS / "two_optimizers.py"))
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["steps"]["count"] == 5
    assert {"forward", "backward", "optimizer"} <= set(report["steps"]["phases"])


def test_script_sees_its_own_argv_cwd_and_path(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys\nprint(sys.argv)\nprint(os.getcwd())\nprint(sys.path[0])\n"
                     "print(__name__)\n")
    done = advisor("profile", "--out", str(tmp_path / "o"), str(probe), "--flag", "x", "-q",
                   cwd=tmp_path)
    plain = python(str(probe), "--flag", "x", "-q", cwd=tmp_path)
    assert done.stdout == plain.stdout
    # No optimizer step at all: advisor says so, and fails as a usage error (script exited 0).
    assert done.returncode == 2
    assert "no training steps found" in done.stderr


def test_window_not_reached_is_reported(tmp_path):
    done = advisor("profile", "--wait", "50", "--out", str(tmp_path), str(SCRIPTS / "exits.py"))
    assert done.returncode == 3  # the script's code wins over advisor's complaint
    assert "fewer than the 51 needed" in done.stderr


def test_missing_script_is_a_usage_error(tmp_path):
    done = advisor("profile", "--out", str(tmp_path), str(tmp_path / "nope.py"))
    assert done.returncode == 2
    assert "advisor: error: can't open file" in done.stderr


def test_nsys_without_nsys_on_path_says_so(tmp_path):
    env = _env()
    env["PATH"] = str(tmp_path)  # nothing there
    done = subprocess.run([sys.executable, "-m", "advisor.cli", "profile", "--nsys", "--out",
                           str(tmp_path), str(SCRIPTS / "exits.py")], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "--nsys needs Nsight Systems (nsys) on PATH" in done.stderr
    assert done.stdout == ""  # the script did not run


def test_torchrun_writes_one_trace_and_analysis_per_rank(tmp_path):
    done = advisor("profile", "--wait", "2", "--steps", "4", "--out", str(tmp_path), "--json",
                   str(tmp_path / "r.json"), "torchrun", "--nproc-per-node", "2",
                   "--master-port", "29533", str(SCRIPTS / "train_mlp.py"), "--iters", "12")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("train_mlp: done 12 iterations") == 2
    for rank, report in ((0, "r.json"), (1, "r.rank1.json")):
        assert (tmp_path / f"trace_rank{rank}.json.gz").exists()
        assert json.loads((tmp_path / report).read_text())["steps"]["count"] == 4
        assert json.loads((tmp_path / f"analysis_rank{rank}.json").read_text())
    job = json.loads((tmp_path / "job.json").read_text())  # and the job across both ranks
    assert job["job"]["ranks"] == 2 and [r["rank"] for r in job["ranks"]] == [0, 1]
    assert "Job: 2 ranks" in done.stdout
    # the job view came from the analysis beside the job, once both ranks had reported
    assert (tmp_path / "job.claimed").exists()
    for rank in (0, 1):
        assert json.loads((tmp_path / f"background_rank{rank}.json").read_text())["state"] == "done"


# ----- in-process (CliRunner) ------------------------------------------------------------------


def _hooks_state():
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o
    from torch.utils.data import dataloader as d

    return (dict(m._global_forward_hooks), dict(m._global_forward_pre_hooks),
            dict(o._global_optimizer_pre_hooks), dict(o._global_optimizer_post_hooks),
            torch.autograd.backward, d._BaseDataLoaderIter.__next__, d.DataLoader.__iter__,
            torch.save, torch.cuda.CUDAGraph.capture_begin, torch.cuda.CUDAGraph.capture_end)


def test_cli_runner_profiles_in_process_and_removes_every_hook(tmp_path):
    before = _hooks_state()
    result = CliRunner().invoke(
        cli, ["profile", "--wait", "2", "--steps", "4", "--out", str(tmp_path), "--json",
              str(tmp_path / "r.json"), str(SCRIPTS / "train_mlp.py"), "--iters", "12",
              "--exit-code", "5"],
        standalone_mode=False)
    assert result.exception is None, result.output
    assert result.return_value == 5
    assert "train_mlp: done 12 iterations" in result.stdout
    assert "Steps: 4 found" in result.stderr and "Steps:" not in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["steps"]["count"] == 4
    assert _hooks_state() == before


def test_cli_runner_raising_script(tmp_path):
    result = CliRunner().invoke(
        cli, ["profile", "--wait", "1", "--steps", "3", "--out", str(tmp_path), "-q",
              str(SCRIPTS / "train_mlp.py"), "--raise-at", "6"],
        standalone_mode=False)
    assert result.return_value == 1
    assert "RuntimeError: planted failure at iteration 6" in result.stderr
    assert 'train_mlp.py", line' in result.stderr and "runpy" not in result.stderr
    report = json.loads((tmp_path / "analysis_rank0.json").read_text())
    assert report["steps"]["count"] == 3


def test_cli_runner_no_steps_raises_capture_error(tmp_path):
    probe = tmp_path / "noop.py"
    probe.write_text("print('hi')\n")
    result = CliRunner().invoke(cli, ["profile", "--out", str(tmp_path), str(probe)],
                                standalone_mode=False)
    assert isinstance(result.exception, CaptureError)
    assert result.stdout == "hi\n"


def test_nsys_child_writes_its_status_and_never_breaks_the_job(tmp_path):
    # The child that runs under `nsys profile`. Here (no CUDA) cudaProfilerStart fails: advisor
    # reports it, the script runs to its end with its exit code, and the status says what ran.
    done = advisor("profile", "--nsys-child", "--wait", "2", "--steps", "3", "--out",
                   str(tmp_path), str(SCRIPTS / "exits.py"))
    assert done.returncode == 3
    assert done.stdout == "exits: leaving with 3\n"
    assert "tracing failed" in done.stderr
    status = json.loads((tmp_path / "capture_rank0.json").read_text())
    assert status["exit_code"] == 3
    assert status["complete"] == list(range(11))
    assert status["window_started"] and not status["recorded"]


def test_public_api_outside_advisor_marks_the_scripts_own_profiler():
    import advisor.capture as ac
    from advisor.capture import session

    model = torch.nn.Linear(4, 4)
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with ac.step(), ac.phase("forward"):
                    model(torch.randn(2, 4))
        names = [e.name for e in prof.events()]
    finally:
        session.activate(None)
    assert names.count("forward") == 3
    assert {"step 0", "step 1", "step 2"} <= set(names)


def test_step_and_phase_decorate_functions():
    import advisor.capture as ac
    from advisor.capture import session

    calls = []

    @ac.step
    def train_step(x):
        calls.append(x)
        return x + 1

    @ac.phase("data")
    def load():
        return 1

    try:
        assert train_step(load()) == 2 and train_step(2) == 3
        assert session.active().state.complete == [0, 1]
    finally:
        session.activate(None)
    assert calls == [1, 2]


def test_script_failing_before_training_is_not_told_it_has_no_steps(tmp_path):
    # Seen on the H100: a Lightning script that raised in Trainer(...) got "no training steps
    # found: the script never called optimizer.step()", which sends the user the wrong way.
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('bad config')\n")
    done = advisor("profile", "--out", str(tmp_path / "o"), str(broken), cwd=tmp_path)
    assert done.returncode == 1
    assert "bad config" in done.stderr
    assert "exited with 1 before its first training step" in done.stderr
    assert "no training steps found" not in done.stderr
    assert "Traceback" not in done.stderr.split("bad config")[-1]
