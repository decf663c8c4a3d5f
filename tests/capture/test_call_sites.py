"""Source lines at the call, not the construction, and never advisor's own frames (issue 33,
item 2): `advisor profile` on the CPU of a script whose model and loss are built on one line
and called on another, with batches from a DataLoader (its ``__next__`` is patched by
advisor's hooks), its torch.profiler trace recorded with stacks."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.graph.call_sites import SourceFiles, instance_names
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "built_then_called.py"


def _line(needle: str) -> int:
    return next(n for n, text in enumerate(SCRIPT.read_text().splitlines(), 1) if needle in text)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("calls")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "advisor.cli", "profile", "--wait", "3", "--steps", "5",
         "--out", str(d), "--json", str(d / "report.json"), str(SCRIPT)],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD_S, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stderr
    with gzip.open(d / "trace_rank0.json.gz", "rt") as f:
        trace = f.read()
    # the trace really holds advisor's hooks among the script's frames
    assert "advisor/capture/session.py" in trace and '"nn.Module: Sequential_0"' in trace
    return json.loads((d / "report.json").read_text())["source"]


def _rows(src: dict) -> list[dict]:
    return [*src["host"], *src["gpu_idle"]]


def test_module_and_loss_calls_are_named_at_their_call_lines(report):
    built, called = _line("model = torch.nn.Sequential("), _line("out = model(x)")
    loss_built, loss_called = _line("loss_fn = torch.nn.MSELoss()"), _line("loss = loss_fn(")
    by_via = {r["via"]: r for r in _rows(report)}
    assert by_via["Sequential"]["call_lines"] == [called] != [built]
    assert by_via["MSELoss"]["call_lines"] == [loss_called] != [loss_built]
    assert by_via["__next__ (torch/utils/data/dataloader.py)"]["call_line"] == _line(
        "for x, y in loader:")


def test_advisor_hooks_are_never_a_line_or_a_call_of_the_user(report):
    text = json.dumps(report)
    assert "advisor/capture" not in text and "click/" not in text and "cli.py" not in text
    assert all(r["file"] == SCRIPT.name for r in _rows(report))


def test_instances_follow_wrappers_but_not_calls_on_them(tmp_path):
    """``torch.compile(model)`` and ``DDP(model)`` are still the model, ``model.parameters()``
    is not (else ``opt(...)`` would be a model call); a ModuleList's loop variable is a block."""
    (tmp_path / "t.py").write_text(
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.blocks = nn.ModuleList([Block() for _ in range(3)])\n"
        "    def forward(self, x):\n"
        "        for block in self.blocks:\n"
        "            x = block(x)\n"
        "        return x\n"
        "model = Net()\n"
        "model = torch.compile(model)\n"
        "opt = Adam(model.parameters())\n"
        "y = model(x)\n")
    files = SourceFiles([tmp_path])
    tree = files._tree("t.py")
    assert tree is not None
    assert instance_names(tree, "Net") == {"model"}
    assert files.call_lines("t.py", "<module>", 0, "Net") == [13]
    assert files.call_lines("t.py", "forward", 6, "Block") == [8]
