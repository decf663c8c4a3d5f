"""A script that pickles or copies its whole model under `advisor profile`.

The session keeps forward hooks on the top-level module(s) it found; ``Module.__getstate__`` keeps
a module's hooks, so ``torch.save(model)``, ``pickle`` and ``copy.deepcopy(model)`` (an EMA copy)
failed under advisor where plain Python succeeds (found while measuring the hooks' cost, issue
32). The hooks now leave our entries out of a module's copied state
(`advisor.capture.hooks.Hooks._keep_hooks_out_of_copies`)."""

from __future__ import annotations

import copy
import io
import pickle

import pytest

torch = pytest.importorskip("torch", reason="the session hooks torch")

from torch import nn  # noqa: E402

from advisor.capture import session  # noqa: E402
from advisor.capture.window import KinetoRecorder  # noqa: E402


def _trained(model: nn.Module) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(session.DISCOVERY_STEPS + 2):
        model(torch.randn(1, 2)).sum().backward()
        opt.step()


def test_plain_python_saves_the_whole_model():
    model = nn.Linear(2, 2)
    _trained(model)
    torch.save(model, io.BytesIO())


def test_the_whole_model_saves_and_copies_under_the_session():
    model = nn.Linear(2, 2)
    sess = session.Session(session.WindowPlan(wait=10**6, steps=1), KinetoRecorder(None))
    sess.install()
    session.activate(sess)
    try:
        _trained(model)
        assert sess.state.top_modules == ["Linear"]
        assert model._forward_hooks  # the session's hooks are on it
        buf = io.BytesIO()
        torch.save(model, buf)
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        twin = copy.deepcopy(model)  # an EMA copy
        again = pickle.loads(pickle.dumps(model))
        for other in (loaded, twin, again):
            assert not other._forward_hooks and not other._forward_pre_hooks
            assert torch.equal(other.weight, model.weight)
        assert model._forward_hooks  # the original keeps them
    finally:
        sess.finish()
        session.activate(None)
