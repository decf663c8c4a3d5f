"""More DataLoader workers that make the run slower (issue 34's hidden script: 2 -> 15 workers
measured 0.89x): a real multi-epoch loop whose workers restart every short epoch and whose
batches cost nearly nothing to make. The loader model reads the run `advisor profile` recorded
with 2 workers and predicts the step with 16; the script is then run alone with 2 and with
16 workers and its own clock says which is faster. The model must get the direction right.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor.engine.loader_model import observe, predict, propose

torch = pytest.importorskip("torch", reason="advisor profile needs torch (the profile extra)")

from tests.capture.test_profile_cpu import SCRIPTS, advisor, python  # noqa: E402

MORE = 16
ARGS = ("--epochs", "4", "--iters", "20")


def _loop_s(workers: int, tmp) -> float:
    done = python(str(SCRIPTS / "epochs.py"), *ARGS, "--workers", str(workers), "--out", str(tmp))
    assert done.returncode == 0, done.stderr
    return float(re.search(r"epochs: ([\d.]+) s", done.stdout).group(1))


def test_more_workers_predicted_and_measured_slower_on_short_epochs(tmp_path):
    out = tmp_path / "prof"
    done = advisor("profile", "-q", "--steps", "5", "--out", str(out), str(SCRIPTS / "epochs.py"),
                   *ARGS, "--workers", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    run = observe(json.loads((out / "steps_rank0.json").read_text())["state"])
    assert run is not None and run.workers == 2 and not run.persistent
    assert run.epoch_steps == 20 and run.restart_ns > 0  # every epoch starts its workers
    more = predict(run, MORE)
    assert more.speedup_over(run) < 1.0, more  # the forks grow; the supply was never short
    assert propose(run).best.workers <= run.workers or not run.waits
    # the script alone, 2 workers then 16, twice each: its own clock over its 4 epochs
    two = min(_loop_s(2, tmp_path), _loop_s(2, tmp_path))
    more_s = min(_loop_s(MORE, tmp_path), _loop_s(MORE, tmp_path))
    assert more_s > two, (two, more_s)
