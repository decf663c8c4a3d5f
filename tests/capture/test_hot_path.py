"""The session's per-step work outside the window, kept short for launch-bound jobs (issue 32),
still records what the analysis reads: real torch, real loops, in process.

`benchmarks/hook_cost.py --parts` measures what each hook costs per step; these tests hold the
cheaper paths to the same results: no NVTX emitter and no profiler open nothing, a profiler
window still gets its ranges, and the DataLoader's CPU time is read where the rules use it
(loaders without workers) and only there."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the session hooks torch")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from advisor.capture import session  # noqa: E402
from advisor.capture.marks import Marker, _NoNvtx  # noqa: E402
from advisor.capture.window import KinetoRecorder  # noqa: E402
from advisor.engine.host import HostFacts  # noqa: E402


def test_no_emitter_and_no_profiler_open_nothing():
    m = Marker(_NoNvtx())
    assert not m.live
    assert m.open("forward", "phase", False) is None
    m.close(None)  # what the session passes back: no error, nothing to end


def test_a_profiler_window_still_gets_its_ranges():
    m = Marker(_NoNvtx())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        mark = m.open("step 7", "step", True)
        torch.ones(4).sum()
        m.close(mark)
    assert mark is not None and mark[0] is None  # no NVTX token, a record_function
    assert "step 7" in {e.name for e in prof.events()}


def _run(loader: DataLoader, steps: int) -> session.CaptureState:
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sess = session.Session(session.WindowPlan(wait=10**6, steps=1), KinetoRecorder(None))
    sess.install()
    session.activate(sess)
    try:
        it = iter(loader)
        for _ in range(steps):
            (x,) = next(it)
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
    finally:
        sess.finish()
        session.activate(None)
    return sess.state


def test_a_loader_without_workers_is_cpu_timed_per_batch():
    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=4)
    st = _run(loader, 10)
    assert st.loader["num_workers"] == 0 and st.loader["_batches"] == 10
    steps = [a for k, a in st.activity.items() if k >= 0]
    assert all(a["data_cpu_batches"] == a["data_batches"] == 1 for a in steps)
    facts = HostFacts.from_state(st)
    assert facts.loader_cpu_ns_per_batch and facts.loader_cpu_ns_per_batch > 0


def test_a_loader_with_workers_reads_no_cpu_clock():
    loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=4, num_workers=1)
    st = _run(loader, 6)
    assert st.loader["num_workers"] == 1 and st.loader["_batches"] == 6
    assert not any("data_cpu" in a for a in st.activity.values())
    assert any(a.get("data_batches") for a in st.activity.values())
    assert HostFacts.from_state(st).loader_cpu_ns_per_batch is None


def test_the_loader_drawn_from_most_keeps_its_settings():
    """Two loaders: the count follows each batch; the settings are those of the one with the
    most batches (read again when another takes the lead, not at every batch)."""
    small = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=2)
    big = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sess = session.Session(session.WindowPlan(wait=10**6, steps=1), KinetoRecorder(None))
    sess.install()
    session.activate(sess)
    try:
        for loader in (small, big):
            for (x,) in loader:
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
    finally:
        sess.finish()
        session.activate(None)
    # 8 batches and the call that ends the epoch (StopIteration is a __next__ call too)
    assert sess.state.loader["batch_size"] == 8 and sess.state.loader["_batches"] == 9


def test_captures_made_before_the_cpu_count_read_as_before():
    """Status files written before ``data_cpu_batches`` existed timed every batch's CPU."""
    state = {"activity": {"3": {"data": 900, "data_cpu": 600, "data_batches": 2},
                          "4": {"data": 300, "data_cpu": 200, "data_batches": 1}}}
    assert HostFacts.from_state(state).loader_cpu_ns_per_batch == pytest.approx(800 / 3)
