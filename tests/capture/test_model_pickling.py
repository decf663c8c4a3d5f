"""A script that pickles its whole model (``torch.save(model, path)``) under `advisor profile`.

The session keeps forward hooks on the top-level module(s) it found (`Session._end_discovery`);
they are closures, and ``Module.__getstate__`` keeps a module's hooks, so pickling the module
raises ``Can't pickle local object 'Session.install.<locals>.module_post'`` where plain Python
saves it. Found while measuring the hooks' cost (issue 32); left for the fix (make the hooks
picklable to something inert, or detach them around ``torch.save``, which the session already
wraps), so this test is a strict xfail until then."""

from __future__ import annotations

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


@pytest.mark.xfail(strict=True, raises=(AttributeError, pickle.PicklingError),
                   reason="the top-level module's hooks are local closures: "
                   "pickling the module fails under advisor profile (see the module docstring)")
def test_the_whole_model_saves_under_the_session():
    model = nn.Linear(2, 2)
    sess = session.Session(session.WindowPlan(wait=10**6, steps=1), KinetoRecorder(None))
    sess.install()
    session.activate(sess)
    try:
        _trained(model)
        assert sess.state.top_modules == ["Linear"]
        torch.save(model, io.BytesIO())
    finally:
        sess.finish()
        session.activate(None)
