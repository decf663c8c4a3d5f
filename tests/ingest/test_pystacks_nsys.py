"""Python stacks sampled beside an nsys export become its Python-frame ranges and source lines.

The export and its step clock are a real pair: ``fixtures/archive/unprofiled/h100-2026-11-23b/
nanogpt-nsys`` is `advisor profile --nsys` of nanoGPT on an H100, with the session's status file
(``capture_rank0.json``, each step's start and end on the job's clock) written by the same run.
That pair tests the clock fit on real data.

The samples are recorded for real by advisor's sampler, on this machine's CPU torch, and the
pairing of those samples with that export is CONSTRUCTED, because there is no GPU here and no
capture with samples exists yet (the sampler is new): the CPU loop paces each of its steps to
the duration and start of the H100 capture's steps (a real forward, backward and update, then a
sleep in ``wait_for_gpu`` up to the H100 step's end), and the status file beside the export gets
one invented number, ``run_start_ns`` (which the H100 run did not record then), chosen so that the
CPU run's first step starts where the H100 run's first recorded step started. Everything else
read is as recorded. The real pair is captured on the H100 with one command (docs/profile.md):
``advisor profile --nsys --out OUT train.py`` then ``advisor analyze OUT/nsys_rank0.sqlite``.
"""

from __future__ import annotations

import json
import lzma
import shutil
import time
from pathlib import Path

import pytest

from tests.archive import archived
from tests.conftest import ROOT

torch = pytest.importorskip("torch", reason="the samples are recorded on a real torch loop")

from advisor.analysis import analyze  # noqa: E402
from advisor.capture.pystacks import StackSampler  # noqa: E402
from advisor.graph.model import RangeSource  # noqa: E402
from advisor.ingest.base import load_trace  # noqa: E402
from advisor.ingest.pystacks import MAX_RESIDUAL_NS, fit_clock, read_step_clock  # noqa: E402
from advisor.report.source_view import NSYS_NO_STACKS  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


CAPTURE = archived("unprofiled/h100-2026-11-23b/nanogpt-nsys")  # unpacked (tests.archive)


def _status() -> dict:
    return json.loads(lzma.decompress((CAPTURE / "capture_rank0.json.xz").read_bytes()))


def get_batch():
    return torch.randn(8, 32), torch.randn(8, 32)


def wait_for_gpu(until_ns: int) -> None:
    """Stands for the host waiting on the device: sleeps to the H100 step's end."""
    left = until_ns - time.perf_counter_ns()
    if left > 0:
        time.sleep(left / 1e9)


MICRO_BATCHES = 10
"""Milliseconds of host work per step (0.3-3 ms each here, by the machine's load), as a
launch-bound step has, leaving most of the H100 step to `wait_for_gpu`."""


def train_step(model, opt) -> None:
    for _ in range(MICRO_BATCHES):
        x, y = get_batch()
        torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


@pytest.fixture(scope="module")
def paired(tmp_path_factory) -> tuple[Path, dict, dict[int, int]]:
    """The export, the status file (one invented number) and samples of a paced CPU run."""
    status = _status()
    steps = {i: (b, e) for i, b, e in status["step_times"]}
    recorded = status["recorded"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(4)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_step(model, opt)  # warm-up, outside the samples
    first = steps[recorded[0]][0]
    sampler = StackSampler()
    t0 = time.perf_counter_ns() + 5_000_000
    waited: dict[int, int] = {}
    sampler.start()
    for n in recorded:
        b, e = steps[n]
        wait_for_gpu(t0 + b - first)  # the ~70 us between two H100 steps
        train_step(model, opt)
        w = time.perf_counter_ns()
        wait_for_gpu(t0 + e - first)
        waited[n] = time.perf_counter_ns() - w
    # -1: how far the CPU run ended past the H100 window's end (a busy machine overruns steps)
    waited[-1] = max(0, time.perf_counter_ns() - (t0 + steps[recorded[-1]][1] - first))
    sampler.stop()
    d = tmp_path_factory.mktemp("nsys-out")
    shutil.copy(CAPTURE / "nsys_rank0.sqlite.gz", d / "nsys_rank0.sqlite.gz")
    sampler.write(d / "pystacks_rank0.json.gz")
    status["run_start_ns"] = t0 - first  # the constructed part (see the module docstring)
    (d / "capture_rank0.json").write_text(json.dumps(status))
    return d, status, waited


def test_the_real_h100_pair_fits_one_line():
    """The session's step clock and the export's step ranges of one real H100 run."""
    status = _status()
    graph = load_trace(CAPTURE / "nsys_rank0.sqlite.gz")
    times = {i: (b, e) for i, b, e in status["step_times"]}
    pairs = []
    for s in graph.steps:
        b, e = times[s.index]
        pairs += [(b, s.cpu_start_ns), (e, s.cpu_end_ns)]
    fit = fit_clock(pairs)
    assert fit is not None and fit.points == 16 and fit.problem is None
    assert abs(fit.slope - 1) < 1e-4 and fit.max_residual_ns < 20_000  # measured: 15 ppm, 5.4 us
    # a step clock paired one step off is refused: H100 steps differ by more than the tolerance
    shifted = [(times[s.index - 1][0], s.cpu_start_ns) for s in graph.steps] + \
              [(times[s.index - 1][1], s.cpu_end_ns) for s in graph.steps]
    assert fit_clock(shifted).max_residual_ns > MAX_RESIDUAL_NS


def test_samples_become_python_ranges_on_the_steps_thread(paired):
    d, _, waited = paired
    graph = load_trace(d / "nsys_rank0.sqlite.gz")
    python = [r for r in graph.ranges if r.source is RangeSource.PYTHON]
    assert python and graph.info.totals["python_samples"] > 50
    step = graph.steps[0]
    assert {(r.pid, r.tid) for r in python} == {(step.pid, step.tid)}
    names = {r.name.split(": ", 1)[1] for r in python}
    # the loop's own functions; get_batch (microseconds) and any one torch function may be missed
    assert {"train_step", "wait_for_gpu"} <= names
    assert any(r.name.startswith("torch/") for r in python)  # torch's frames under train_step
    here = [r for r in python if r.name.endswith(": wait_for_gpu")]
    # named as torch.profiler names it: relative to the sys.path entry the file is under
    assert here[0].name.split("(")[0].endswith("test_pystacks_nsys.py")
    assert not here[0].name.startswith("/")
    lo, hi = graph.steps[0].cpu_start_ns, graph.steps[-1].cpu_end_ns
    # from the sampler's start (5 ms before the first step) to the CPU run's end
    assert all(lo - 6_000_000 <= r.start_ns and r.end_ns <= hi + waited[-1] + 2_000_000
               for r in python)
    assert not [n for n in graph.info.notes if "pystacks" in n]


def test_source_lines_from_an_nsys_capture(paired):
    d, _, waited = paired
    analysis = analyze(d / "nsys_rank0.sqlite.gz")
    src = analysis.source
    steps = [s.index for s in analysis.context.steps]
    assert src is not None and src.steps == len(steps) >= 6
    waited_ns = sum(waited[n] for n in steps) / len(steps)
    by_function = {lc.frame.function: lc.ns_per_step for lc in src.host}
    # the sleep the loop really made per step, against what the samples attribute to it
    assert by_function.get("wait_for_gpu", 0) == pytest.approx(waited_ns, rel=0.25, abs=2e6)
    assert any(lc.frame.function == "train_step" for lc in src.host)
    # the sampler's own cost is not in the calibrated nsys costs: the report says so
    from advisor.engine.profiler_cost import detect

    cal = detect(analysis.graph)
    assert cal.config.endswith(",pystacks") and cal.measured.startswith("not measured")


def test_a_step_clock_that_does_not_line_up_is_said_and_dropped(paired, tmp_path):
    d, status, _ = paired
    for name in ("nsys_rank0.sqlite.gz", "pystacks_rank0.json.gz"):
        shutil.copy(d / name, tmp_path / name)
    bad = dict(status, step_times=[[i + 1, b, e] for i, b, e in status["step_times"]])
    (tmp_path / "capture_rank0.json").write_text(json.dumps(bad))
    graph = load_trace(tmp_path / "nsys_rank0.sqlite.gz")
    assert not any(r.source is RangeSource.PYTHON for r in graph.ranges)
    note = [n for n in graph.info.notes if "pystacks_rank0.json.gz" in n]
    assert note and "does not line up" in note[0]
    analysis = analyze(tmp_path / "nsys_rank0.sqlite.gz")
    assert analysis.source is None


def test_without_a_step_origin_or_samples_nothing_is_guessed(paired, tmp_path):
    d, status, _ = paired
    shutil.copy(d / "nsys_rank0.sqlite.gz", tmp_path / "nsys_rank0.sqlite.gz")
    bare = load_trace(tmp_path / "nsys_rank0.sqlite.gz")  # no samples file: no note, no ranges
    assert not bare.info.notes or not [n for n in bare.info.notes if "pystacks" in n]
    shutil.copy(d / "pystacks_rank0.json.gz", tmp_path / "pystacks_rank0.json.gz")
    # an older capture: run_start_ns 0, its samples cannot be placed
    (tmp_path / "capture_rank0.json").write_text(json.dumps(dict(status, run_start_ns=0)))
    assert read_step_clock(tmp_path, "rank0") is None
    graph = load_trace(tmp_path / "nsys_rank0.sqlite.gz")
    assert not any(r.source is RangeSource.PYTHON for r in graph.ranges)
    assert any("no step clock" in n for n in graph.info.notes)
    (tmp_path / "pystacks_rank0.json.gz").write_bytes(b"not gzip")
    (tmp_path / "capture_rank0.json").write_text(json.dumps(status))
    graph = load_trace(tmp_path / "nsys_rank0.sqlite.gz")
    assert any("not a readable samples file" in n for n in graph.info.notes)


def test_no_samples_keeps_the_nsys_note():
    analysis = analyze(CAPTURE / "nsys_rank0.sqlite.gz")
    from advisor.report.source_view import SourceSection

    assert SourceSection.of(analysis).note == NSYS_NO_STACKS


def test_sampled_frames_leave_the_traced_ranges_and_the_idle_blame_as_they_were(paired, tmp_path):
    """Sampled frame edges are estimates and cross the phase and step NVTX ranges; the range
    tree (`OpGraph.ranges_at`, the step breakdown's idle causes) must read as without them."""
    from advisor.graph.step_breakdown import idle_segments

    d, _, _ = paired
    shutil.copy(d / "nsys_rank0.sqlite.gz", tmp_path / "nsys_rank0.sqlite.gz")
    bare = load_trace(tmp_path / "nsys_rank0.sqlite.gz")
    sampled = load_trace(d / "nsys_rank0.sqlite.gz")
    assert len(sampled.ranges) > len(bare.ranges)
    step = bare.steps[0]
    for t in range(step.cpu_start_ns, bare.steps[-1].cpu_end_ns, 97_000):
        assert ([r.id for r in sampled.ranges_at(step.pid, step.tid, t)]
                == [r.id for r in bare.ranges_at(step.pid, step.tid, t)])
    for a, b in zip(bare.steps, sampled.steps):
        assert idle_segments(sampled, b) == idle_segments(bare, a)


def test_advisor_analyze_shows_source_lines_of_the_export_and_its_folder(paired, tmp_path):
    """The command the H100 check runs: `advisor analyze OUT/nsys_rank0.sqlite` (and OUT)."""
    import os
    import subprocess
    import sys

    d, _, _ = paired
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for target in (d / "nsys_rank0.sqlite.gz", d):
        out = tmp_path / "report.json"
        done = subprocess.run([sys.executable, "-m", "advisor.cli", "analyze", str(target),
                               "--json", str(out)], capture_output=True, text=True, env=env,
                              cwd=Path(__file__).parent, timeout=600)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        report = json.loads(out.read_text())
        if target == d:  # a folder: the job view, with the rank's own report inside
            assert "pystacks_rank0.json.gz" in done.stdout + done.stderr  # skipped, named
            continue
        src = report["source"]
        assert src["stacks"] is True and src["python_frames"] > 0
        assert any(row["function"] == "wait_for_gpu" for row in src["host"])
        assert "line of your script" in done.stdout


# A training loop written at the script's top level, run the way `advisor profile` runs a
# script (`advisor.capture.script.run`: runpy, as ``__main__``) and paced to the H100 export's
# steps like `paired`; the wait for the GPU is a C call made straight from module level.
MODULE_LOOP = '''\
import json
import os
import time

import torch

steps = json.loads(os.environ["STEPS"])
model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(4)])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)


def get_batch():
    return torch.randn(8, 32), torch.randn(8, 32)


torch.nn.functional.mse_loss(model(get_batch()[0]), get_batch()[1]).backward()
opt.step()  # warm-up: the first step imports what it needs
t0 = time.perf_counter_ns() + 5_000_000
with open(os.environ["T0_FILE"], "w") as f:
    f.write(str(t0))
slept = 0
for b, e in steps:
    time.sleep(max(0, t0 + b - time.perf_counter_ns()) / 1e9)
    for _ in range(10):
        x, y = get_batch()
        torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    w = time.perf_counter_ns()
    time.sleep(max(0, t0 + e - time.perf_counter_ns()) / 1e9)  # the wait for the GPU
    slept += time.perf_counter_ns() - w
with open(os.environ["T0_FILE"] + ".slept", "w") as f:
    f.write(str(slept // len(steps)))
'''
HARNESS = '''\
import os, sys, time
import torch
from advisor.capture.pystacks import StackSampler
from advisor.capture.script import Target, run
torch.set_num_threads(1)
sampler = StackSampler()
sampler.start()
code = run(Target(sys.argv[1]), [])
sampler.stop()
sampler.write(sys.argv[2])
print(code)
'''


@pytest.fixture(scope="module")
def module_level(tmp_path_factory) -> tuple[Path, int, int]:
    """An export folder whose samples come from `MODULE_LOOP` run as a script (runpy frames
    under advisor's own, the loop in ``<module>``), the line of its wait for the GPU, and the
    time the loop slept on that line per step (its own clock: on a loaded machine the CPU work
    takes more of each paced step and the wait less)."""
    import os
    import subprocess
    import sys

    status = _status()
    steps = {i: (b, e) for i, b, e in status["step_times"]}
    recorded = status["recorded"]
    first = steps[recorded[0]][0]
    d = tmp_path_factory.mktemp("nsys-module")
    script = d / "train.py"
    script.write_text(MODULE_LOOP)
    env = dict(os.environ, STEPS=json.dumps([[steps[n][0] - first, steps[n][1] - first]
                                             for n in recorded]),
               T0_FILE=str(d / "t0"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", HARNESS, str(script),
                           str(d / "pystacks_rank0.json.gz")], capture_output=True, text=True,
                          env=env, cwd=d, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "0"
    t0 = int((d / "t0").read_text())
    slept = int((d / "t0.slept").read_text())
    shutil.copy(CAPTURE / "nsys_rank0.sqlite.gz", d / "nsys_rank0.sqlite.gz")
    status["run_start_ns"] = t0 - first  # the constructed part (see the module docstring)
    (d / "capture_rank0.json").write_text(json.dumps(status))
    line = 1 + MODULE_LOOP.splitlines().index(
        "    time.sleep(max(0, t0 + e - time.perf_counter_ns()) / 1e9)  # the wait for the GPU")
    return d, line, slept


def test_module_level_calls_are_named_by_their_line_not_by_runpy(module_level):
    """Under nsys the samples hold no C frames: time in a C call made straight from a script's
    top level is ``<module>``'s own. It was reported as ``train.py <module> -> _run_code``
    (runpy's frames, seen in the same samples as ``<module>``, nested inside it); it is the
    line of the call, and neither runpy's nor advisor's frames name any row."""
    from advisor.report.source_view import Locator, SourceSection

    d, line, slept = module_level
    analysis = analyze(d / "nsys_rank0.sqlite.gz")
    src = analysis.source
    assert src is not None and src.steps >= 6
    rows = src.host + src.idle
    named = " ".join(f"{lc.frame.file} {lc.frame.function} {lc.via}" for lc in rows)
    for foreign in ("runpy", "_run_code", "advisor/", "run_path"):
        assert foreign not in named
    host = {(lc.frame.function, lc.frame.line, lc.via): lc.ns_per_step for lc in src.host}
    waited = host.get(("<module>", line, ""), 0.0)
    # the loop's own clock says how long it slept on that line per step; the sampled rows must
    # give that time to the line (not to runpy's frames or the loop's other lines). The share
    # of the step it is depends on this machine's load (CI failed a fixed "half the step")
    assert slept > 0
    assert 0.7 * slept < waited < 1.3 * slept
    labels = [Locator(SourceSection.of(analysis)).label(lc) for lc in src.idle]
    assert f"train.py:{line} <module>" in labels
