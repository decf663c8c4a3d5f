"""advisor's own Python-stack sampler (`advisor.capture.pystacks`) and the nsys recorder that runs
it, on a real CPU torch training loop (the nsys capture itself needs a GPU: `_capture` and
`_release`, the two CUDA profiler API calls, are the only parts replaced below)."""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the sampler is tested on a real torch loop")

from advisor.capture import session  # noqa: E402
from advisor.capture.pystacks import StackSampler, frame_of  # noqa: E402
from advisor.capture.window import CudaProfilerRecorder  # noqa: E402
from advisor.ingest.pystacks import read_samples  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return model, opt


def get_batch() -> tuple:
    time.sleep(0.002)  # a slow batch: the sampler sees it (sleep releases the GIL)
    return torch.randn(8, 16), torch.randn(8, 16)


def train_step(model, opt) -> None:
    x, y = get_batch()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def test_sampler_records_the_training_threads_stacks(tmp_path):
    model, opt = _model()
    s = StackSampler()
    before = sys.getswitchinterval()
    assert not any(t.name == "advisor-pystacks" for t in threading.enumerate())
    s.start()
    assert any(t.name == "advisor-pystacks" for t in threading.enumerate())
    assert sys.getswitchinterval() == pytest.approx(min(before, 0.001))  # while sampling only
    for _ in range(20):
        train_step(model, opt)
    s.stop()
    assert sys.getswitchinterval() == before
    # outside the window nothing runs: the thread is gone once stop returns
    assert not any(t.name == "advisor-pystacks" for t in threading.enumerate())
    assert len(s.times) >= 10  # 20 steps of >= 2 ms at 1 kHz, on a loaded machine
    assert list(s.times) == sorted(s.times)
    named = {frame_of(c, line)[2] for st in s.stacks for c, line in st}
    assert {"train_step", "get_batch", "test_sampler_records_the_training_threads_stacks"} <= named
    here = frame_of(train_step.__code__)
    assert here[1] == train_step.__code__.co_firstlineno  # the line a function starts at
    assert not Path(here[0]).is_absolute()  # relative to its sys.path entry, as torch.profiler

    path = tmp_path / "pystacks_rank0.json.gz"
    s.write(path)
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]  # no temporary left
    back = read_samples(path)
    assert back.times == list(s.times)
    assert [back.frames[k][2] for k in back.stacks[back.stack_ids[-1]]][-1] in named
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["cpu_ns"] > 0 and doc["tid"] == threading.get_native_id()


def test_sampler_keeps_bounded_memory():
    s = StackSampler(interval_s=0.0005, max_samples=5)
    s.start()
    time.sleep(0.1)
    assert s.truncated and len(s.times) == 5  # stopped by itself at the cap
    s.stop()


def _inside_optimizer_step() -> bool:
    """Whether torch's ``Optimizer.step#...`` record_function is open: its wrapper is on the
    stack (torch/optim/optimizer.py ``profile_hook_step``'s ``wrapper``)."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name == "wrapper" and code.co_filename.replace("\\", "/").endswith(
                "torch/optim/optimizer.py"):
            return True
        f = f.f_back
    return False


class _Probe:
    def __init__(self, log: list) -> None:
        self.log = log

    def __exit__(self, *exc) -> None:
        self.log.append(("probe ended", _inside_optimizer_step()))


class _CpuRecorder(CudaProfilerRecorder):
    """The nsys recorder without its two CUDA profiler API calls, and with a probe that logs
    where it ends (``emit_nvtx`` needs a CUDA build: on CPU torch it raises at entry)."""

    def __init__(self, stacks_path: Path | None) -> None:
        super().__init__(stacks_path)
        self.log: list = []

    def start(self) -> None:
        self.log.append("window")
        super().start()

    def _capture(self) -> None:
        if not self._started:
            self.log.append("capture")
        self._started = True

    def _release(self) -> None:
        self.log.append("release")

    def _open_probe(self):
        self.log.append("probe opened")
        return _Probe(self.log)

    def _close_probe(self, probe) -> None:
        probe.__exit__(None, None, None)


def _run_session(rec, steps: int = 8) -> session.Session:
    model, opt = _model()
    sess = session.Session(session.WindowPlan(wait=3, steps=2), rec)
    sess.install()
    session.activate(sess)
    try:
        for _ in range(steps):
            train_step(model, opt)
        sess.finish()
    finally:
        sess.uninstall()
        session.activate(None)
    return sess


def test_shape_probe_ends_outside_the_optimizers_record_function(tmp_path):
    """The bug: the window starts at a step boundary, in the optimizer's post hook, inside torch's
    ``Optimizer.step#SGD.step`` record_function; ending ``emit_nvtx`` there made torch print
    ``state_ptr INTERNAL ASSERT FAILED ... nvtx_observer.cpp`` when that range closed. On CPU
    torch the assert itself cannot happen (no NVTX profiler without CUDA), so the order is tested:
    the probe must end where no optimizer step is open. Where the backward runs inside the
    optimizer step (Lightning's closure), it ends at the window's first mark outside it."""
    rec = _CpuRecorder(tmp_path / "pystacks_rank0.json.gz")
    sess = _run_session(rec)
    # it ends as the probe step's backward returns: before the window, outside the optimizer
    assert rec.log == ["capture", "probe opened", ("probe ended", False), "window", "release"]
    assert sess.state.recorded == [3, 4]
    assert rec.written and not rec.probing and not rec.probe_ending


def test_probe_ends_outside_the_optimizer_when_backward_runs_inside_it(tmp_path):
    """Lightning's way: forward and backward run in a closure that ``optimizer.step`` calls, so
    every phase mark but the batch fetch is inside ``Optimizer.step#...``."""
    rec = _CpuRecorder(None)
    model, opt = _model()

    def closure():
        x, y = get_batch()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 16)),
                                         batch_size=8)
    sess = session.Session(session.WindowPlan(wait=3, steps=2), rec)
    sess.install()
    session.activate(sess)
    try:
        for _ in loader:  # a batch fetch outside the optimizer step, each step
            opt.step(closure)
            opt.zero_grad(set_to_none=True)
        sess.finish()
    finally:
        sess.uninstall()
        session.activate(None)
    assert ("probe ended", False) in rec.log and ("probe ended", True) not in rec.log
    assert rec.log.index(("probe ended", False)) > rec.log.index("window")
    assert sess.state.recorded == [3, 4]


def test_recorder_samples_only_inside_the_window_and_writes_beside_the_capture(tmp_path):
    path = tmp_path / "pystacks_rank0.json.gz"
    rec = _CpuRecorder(path)
    sess = _run_session(rec)
    samples = read_samples(path)
    origin = sess.state.run_start_ns
    assert origin > 0  # the step clock's origin is in the status file: the reader needs it
    steps = {i: (b + origin, e + origin) for i, b, e in sess.state.step_times}
    first, last = steps[3][0], steps[4][1]
    # every sample lies in the window: from the boundary that opened it to the one that closed it
    assert samples.times and all(first - 5_000_000 <= t <= last + 5_000_000
                                 for t in samples.times)
    names = {samples.frames[k][2] for s in samples.stacks for k in s}
    assert "train_step" in names
    none = _CpuRecorder(None)  # --no-stacks
    _run_session(none)
    assert none.written and not list(tmp_path.glob("pystacks_*.tmp"))
