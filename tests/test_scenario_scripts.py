"""The H100 scenario scripts stay importable and keep their command line, now that their timing
loop is the harness's (`benchmarks/scenarios/harness.py: standalone`).

They run on an H100, not here; here each one is imported as the harness imports it, and run as
a script with ``--help`` (its options, parsed by the shared loop), and one small scenario runs
two real steps on the CPU through the same loop.
"""

from __future__ import annotations

import runpy
import sys

import pytest

from tests.conftest import ROOT

HERE = ROOT / "benchmarks" / "scenarios"
SCRIPTS = sorted(p.parent.name for p in HERE.glob("*/scenario.py"))
TAKES_DEVICE = {"cpu-bound-loss", "host-sync", "loader-jitter", "rng-bound-dropout",
                "unfused-gemm-gelu", "gemm-shape-alignment"}


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(HERE))
    try:
        import harness

        yield harness
    finally:
        sys.path.remove(str(HERE))


def test_every_scenario_is_listed():
    assert len(SCRIPTS) >= 11


@pytest.mark.parametrize("name", SCRIPTS)
def test_scenario_imports_as_the_harness_loads_it(harness, name):
    mod = harness.load_scenario(name)
    assert callable(mod.build)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scenario_command_line(name, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["scenario.py", "--help"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the harness on it
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(HERE / name / "scenario.py"), run_name="__main__")
    assert done.value.code == 0
    usage = capsys.readouterr().out
    assert "--variant" in usage and "--steps" in usage and "bad" in usage and "good" in usage
    assert ("--device" in usage) == (name in TAKES_DEVICE)


def test_a_scenario_runs_its_steps_through_the_shared_loop(monkeypatch, capsys):
    monkeypatch.setenv("SCENARIO_TINY", "1")
    monkeypatch.setattr(sys, "argv", ["scenario.py", "--device", "cpu", "--steps", "2",
                                      "--variant", "good"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    runpy.run_path(str(HERE / "host-sync" / "scenario.py"), run_name="__main__")
    line = capsys.readouterr().out.strip()
    assert line.startswith("good: 2 steps, ") and " ms/step; host work {" in line


def test_the_harness_applies_a_fix_on_top_of_a_fixed_variant(harness, monkeypatch):
    """``--fix compile`` (docs/validation.md: timing compiler-fusion's fix on a fixed scenario)
    wraps the scenario's model in torch.compile, lazily: nothing compiles until a step runs."""
    import torch

    monkeypatch.setenv("SCENARIO_TINY", "1")
    obj = harness.load_scenario("host-sync").build("good", "cpu")
    eager = obj.model
    assert harness.apply_fix(obj, None).model is eager
    harness.apply_fix(obj, "compile")
    assert isinstance(obj.model, torch._dynamo.eval_frame.OptimizedModule)
    assert obj.model._orig_mod is eager
    with pytest.raises(SystemExit):
        harness.apply_fix(object(), "compile")


def test_the_gelu_fix_swaps_the_site_and_counts_only_epilogue_gemms(harness):
    """``--fix gelu-epilogue`` routes every scenario's GEMM+GELU site through the epilogue; where
    it cannot apply (here: the CPU) the site stays eager and no epilogue GEMM is counted, which
    the harness reads to refuse timing a fix that reached no site (wave 12 timed one such step
    before the check existed: a bf16 model run without autocast)."""
    import gelu_epilogue
    import torch

    fc, x = torch.nn.Linear(8, 16), torch.randn(2, 3, 8)
    try:
        harness.apply_fix(object(), "gelu-epilogue")
        assert gelu_epilogue._impl is gelu_epilogue.fused_gelu_linear
        before = gelu_epilogue.fused_calls
        torch.testing.assert_close(gelu_epilogue.gelu_linear(fc, x), torch.nn.functional.gelu(fc(x)))
        assert gelu_epilogue.fused_calls == before
    finally:
        gelu_epilogue.use(False)
    assert gelu_epilogue._impl is gelu_epilogue.eager
    for name in ("compiler-fusion", "fp32-matmul", "pageable-memcpy", "unfused-attention"):
        source = (HERE / name / "scenario.py").read_text()
        assert "gelu_linear(" in source and "F.gelu(" not in source, name
