"""`advisor profile` leaves the job's behaviour alone (issue 30, item 4): each case runs a real
tiny CPU training script (`scripts/behaves.py`) under plain ``python`` and under ``advisor
profile``, in the same test, and compares what the job did: exit status, its own output, its
own files. Forks, exec'd children, SIGTERM (swallowed by a bare ``except:``, handled by the
script, ignored by the launcher), ``os.chdir``, closed standard streams, an output directory
the script replaces, symlinks planted where advisor writes, and scripts Python cannot run.

Timeouts are generous: the CI machine is small and shared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.test_profile_cpu import ROOT, SCRIPTS

BEHAVES = SCRIPTS / "behaves.py"
TIMEOUT_S = 240
WINDOW = ("--wait", "2", "--steps", "4")  # iterations 3-6 are recorded; `--at 3` is inside
AFTER = "9"  # an iteration after the window has closed and its trace is written


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("CI", None)
    return env


def _ignore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def run(argv: list[str], cwd: Path, ignore_sigterm: bool = False) -> subprocess.CompletedProcess:
    """Run a command the way a launcher would (no terminal), with its output captured."""
    return subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=cwd,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
                          preexec_fn=_ignore_sigterm if ignore_sigterm else None)


def plain(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return run([sys.executable, str(BEHAVES), *args], cwd, **kw)


def profiled(cwd: Path, *args: str, out: str = "advisor-out", opts: tuple[str, ...] = ("-q",),
             **kw) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "advisor.cli", "profile", *WINDOW, "--then", "continue",
                "--out", out, *opts, str(BEHAVES), *args], cwd, **kw)


def job_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip()]


def same_job(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    """The profiled job ended as the plain one did and said the same on stdout."""
    assert b.returncode == a.returncode, (a.returncode, b.stderr[-3000:])
    assert sorted(job_lines(b.stdout)) == sorted(job_lines(a.stdout)), (a.stdout, b.stdout)
    assert "Traceback" not in b.stderr, b.stderr[-3000:]


def recorded_steps(out: Path) -> int:
    return json.loads((out / "analysis_rank0.json").read_text())["steps"]["count"]


@pytest.mark.parametrize(("at", "action"), [("3", "fork"), (AFTER, "fork"),
                                             (AFTER, "fork-train")])
def test_a_fork_leaves_as_it_would(tmp_path, at, action):
    """The forked child (which may train on) exits with its own code (no advisor hooks,
    threads or trace work in it) and the parent's window is analysed as usual."""
    py = plain(tmp_path, "--at", at, action)
    assert py.returncode == 0 and "child: " in py.stdout
    adv = profiled(tmp_path, "--at", at, action)
    same_job(py, adv)
    assert recorded_steps(tmp_path / "advisor-out") == 4


def test_exec_children_are_unaffected(tmp_path):
    for action in ("fork-exec", "subprocess"):
        py = plain(tmp_path, "--at", "3", action)
        adv = profiled(tmp_path, "--at", "3", action)
        same_job(py, adv)


@pytest.mark.parametrize("at", ["3", AFTER])
def test_sigterm_ends_the_job_although_a_bare_except_swallows_exceptions(tmp_path, at):
    py = plain(tmp_path, "--at", at, "sigterm-swallowed")
    assert py.returncode == -signal.SIGTERM and "swallowed" not in py.stdout
    adv = profiled(tmp_path, "--at", at, "sigterm-swallowed",
                   opts=("-q", "--json", str(tmp_path / "r.json")))
    same_job(py, adv)
    if at == AFTER:  # the window had closed: the analysis beside the job reports it
        assert json.loads((tmp_path / "r.json").read_text())["steps"]["count"] == 4


@pytest.mark.parametrize("action", ["sigterm-handled", "sigterm-chained"])
def test_the_scripts_own_sigterm_handler_runs(tmp_path, action):
    """Also one that chains to the handler it found (Lightning's): python's is the default."""
    py = plain(tmp_path, "--at", "3", action)
    assert py.returncode == 0 and "own handler ran" in py.stdout
    same_job(py, profiled(tmp_path, "--at", "3", action))


def test_an_ignored_sigterm_stays_ignored(tmp_path):
    py = plain(tmp_path, "--at", "3", "sigterm-swallowed", ignore_sigterm=True)
    assert py.returncode == 0 and "swallowed" not in py.stdout
    same_job(py, profiled(tmp_path, "--at", "3", "sigterm-swallowed", ignore_sigterm=True))


@pytest.mark.parametrize("at", ["3", AFTER])
def test_chdir_keeps_the_exit_code_and_advisors_files_where_they_were(tmp_path, at):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    py = plain(tmp_path, "--at", at, "chdir", str(elsewhere))
    adv = profiled(tmp_path, "--at", at, "chdir", str(elsewhere),
                   opts=("-q", "--json", "r.json"))
    same_job(py, adv)
    assert recorded_steps(tmp_path / "advisor-out") == 4
    assert json.loads((tmp_path / "r.json").read_text())["steps"]["count"] == 4
    assert not any(elsewhere.iterdir())


def test_an_output_directory_the_script_replaces_is_left_as_the_script_made_it(tmp_path):
    (tmp_path / "advisor-out").mkdir()
    py = plain(tmp_path, "--at", AFTER, "replace-out", "advisor-out")
    (tmp_path / "advisor-out").unlink()
    adv = profiled(tmp_path, "--at", AFTER, "replace-out", "advisor-out")
    same_job(py, adv)
    assert (tmp_path / "advisor-out").read_text() == "the job's own file\n"


@pytest.mark.parametrize("at", ["3", AFTER])
def test_closed_standard_streams_keep_the_exit_code(tmp_path, at):
    py = plain(tmp_path, "--at", at, "close-std")
    assert py.returncode == 0
    adv = profiled(tmp_path, "--at", at, "close-std", opts=())
    assert adv.returncode == py.returncode, adv.stderr[-3000:]
    assert "Traceback" not in adv.stderr


def test_symlinks_in_the_output_directory_are_replaced_not_written_through(tmp_path):
    out = tmp_path / "advisor-out"
    out.mkdir()
    victims = {}
    for name in ("trace_rank0.json.gz", "trace_rank0.json", "analysis_rank0.json",
                 "capture_rank0.json", "handoff_rank0.json", "steps_rank0.json",
                 "background_rank0.json"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("precious\n")
        (out / name).symlink_to(victim)
        victims[name] = victim
    adv = profiled(tmp_path, "--at", "0", "none")
    assert adv.returncode == 0, adv.stderr[-3000:]
    for name, victim in victims.items():
        assert victim.read_text() == "precious\n", name
    assert not (out / "trace_rank0.json.gz").is_symlink()
    assert recorded_steps(out) == 4


@pytest.mark.parametrize("argv", [["-m", "no_such_module_xyz"], ["adir"], ["missing.py"],
                                  ["-m", "json"]])
def test_nothing_to_run_exits_as_python_does(tmp_path, argv):
    (tmp_path / "adir").mkdir()
    py = run([sys.executable, *argv], tmp_path)
    adv = run([sys.executable, "-m", "advisor.cli", "profile", *argv], tmp_path)
    assert adv.returncode == py.returncode, (py.stderr, adv.stderr)
    assert len(adv.stderr.strip().splitlines()) == 1, adv.stderr
    why = py.stderr.strip().split(": ", 1)[1]  # python's message without its own name
    assert adv.stderr.strip() == f"advisor: error: {why}"
