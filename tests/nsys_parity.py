"""nsys and torch.profiler captures of the same job: do they give the same advice? (issue 37)

Shared by ``tests/test_nsys_parity.py`` and ``benchmarks/nsys_parity.py`` (which prints the
table of docs/nsys-parity.md); tests never import from benchmarks/ (issue 31).

A *pair* is a fixture folder holding both an Nsight Systems export (``*.sqlite``, ``.gz`` or
``.xz``) and a torch.profiler (Kineto) trace (``trace*.json``, ``.gz`` or ``.xz``) of the same
script on the same H100, captured one after the other. (The profiler-cost runs of
``fixtures/archive/unprofiled`` hold such pairs as sibling folders ``NAME-nsys`` and ``NAME-kineto``;
read bare, their host-bound steps rest on each profiler's calibrated cost, which
``advisor profile`` fits to the step it measures instead: docs/nsys-parity.md lists them
apart.)

The two agree when the same rules raise findings and each rule's estimated speedups are within
``AGREE_FACTOR`` of each other. Where they do not, `DOCUMENTED` says why; the test holds each
such pair as a strict xfail with that cause, so a pair that starts to agree fails until its
entry is removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
PAIR_ROOTS = ("scenarios", "scenarios-check", "public")
"""The fixture trees whose folders may hold a pair (see `pairs`)."""
AGREE_FACTOR = 1.2
"""The larger of a rule's two estimated speedups over the smaller, at most (issue 37)."""

_NSYS_SUFFIXES = (".sqlite", ".sqlite.gz", ".sqlite.xz")
_KINETO_SUFFIXES = (".json", ".json.gz", ".json.xz")


def _nsys_file(folder: Path) -> Path | None:
    """The folder's nsys export: ``nsys.sqlite*`` first, else its one ``*.sqlite*`` file (a
    second export there, such as a repeat capture for the gate, is not the pair's)."""
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_NSYS_SUFFIXES))
    named = [p for p in found if p.name.startswith("nsys.")]
    return (named or found or [None])[0]


def _kineto_file(folder: Path) -> Path | None:
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.startswith("trace")
                   and p.name.endswith(_KINETO_SUFFIXES))
    named = [p for p in found if p.name.startswith("trace.")]
    return (named or found or [None])[0]


def pairs() -> dict[str, tuple[Path, Path]]:
    """Every fixture folder under `PAIR_ROOTS` with both captures: label -> (nsys, kineto)."""
    out: dict[str, tuple[Path, Path]] = {}
    for root in PAIR_ROOTS:
        for folder in sorted(p for p in (FIXTURES / root).rglob("*") if p.is_dir()):
            nsys, kineto = _nsys_file(folder), _kineto_file(folder)
            if nsys is not None and kineto is not None:
                out[str(folder.relative_to(FIXTURES))] = (nsys, kineto)
    return out


@dataclass(frozen=True)
class Side:
    """One capture's findings: rule -> estimated speedup, raised and below the threshold."""

    raised: dict[str, float]
    below: dict[str, float] = field(default_factory=dict)

    def estimate(self, rule: str) -> float | None:
        return self.raised.get(rule, self.below.get(rule))


@cache
def findings(path: Path) -> Side:
    """The rules a capture raises and their estimates (cached: a test and the table both ask)."""
    from advisor.analysis import analyze

    results = analyze(path).results
    return Side({f.rule: f.estimate.speedup for f in results.findings},
                {f.rule: f.estimate.speedup for f in results.below_threshold})


@dataclass(frozen=True)
class Comparison:
    label: str
    nsys: Side
    kineto: Side

    @property
    def only_nsys(self) -> list[str]:
        return sorted(set(self.nsys.raised) - set(self.kineto.raised))

    @property
    def only_kineto(self) -> list[str]:
        return sorted(set(self.kineto.raised) - set(self.nsys.raised))

    @property
    def apart(self) -> dict[str, float]:
        """Rules raised by both whose estimates differ by more than `AGREE_FACTOR`: the factor."""
        out = {}
        for rule in set(self.nsys.raised) & set(self.kineto.raised):
            a, b = self.nsys.raised[rule], self.kineto.raised[rule]
            factor = max(a, b) / min(a, b)
            if factor > AGREE_FACTOR:
                out[rule] = factor
        return out

    @property
    def agree(self) -> bool:
        return not (self.only_nsys or self.only_kineto or self.apart)

    def differences(self) -> list[str]:
        """What differs, one line each (empty when they agree)."""
        out = []
        for side, rules, other in (("nsys", self.only_nsys, self.kineto),
                                   ("torch.profiler", self.only_kineto, self.nsys)):
            for rule in rules:
                est = other.estimate(rule)
                elsewhere = f" (other: {est:.3f}x, below 2%)" if est else ""
                out.append(f"{rule} only on {side}{elsewhere}")
        for rule, factor in sorted(self.apart.items()):
            out.append(f"{rule} {self.nsys.raised[rule]:.2f}x vs {self.kineto.raised[rule]:.2f}x "
                       f"({factor:.2f} apart)")
        return out


def compare(label: str) -> Comparison:
    nsys, kineto = pairs()[label]
    return Comparison(label, findings(nsys), findings(kineto))


_THRESHOLD = ("at the 2% reporting threshold: the two estimates are within 1.2x of each other "
              "but fall on either side of it")
_HOST_COST = ("the step is host-bound, so the estimate rests on the host time each replay keeps "
              "once its own profiler's tracing cost is taken out, calibrated per profiler (11 us "
              "per CUDA call under nsys; 2 us per call and 2.5 us per operator under "
              "torch.profiler, expected error about 29%)")

DOCUMENTED: dict[str, str] = {
    "scenarios/cpu-bound-loss/bad": (
        f"cpu-bound-loss: {_HOST_COST}; this per-sample loss loop (about 50 syncs per step) runs "
        "twice as slow under either profiler and both estimates are high (measured 2.17x; "
        "docs/validation.md)"),
    "scenarios/uncaptured-cuda-graph/bad": (
        f"uncaptured-cuda-graph: {_HOST_COST}; torch.profiler's per-operator cost on this "
        "launch-bound MLP is above the one calibrated, nsys's is right (measured 3.62x)"),
    "scenarios-check/uncaptured-cuda-graph/bad": (
        f"uncaptured-cuda-graph: {_HOST_COST}; torch.profiler's per-operator cost on this "
        "launch-bound MLP is above the one calibrated, nsys's is right (measured 2.75x)"),
    "scenarios/unfused-attention/bad": (
        "unfused-attention: after the fix the step is host-bound on the unfused program's own "
        "host work (about 280 more operators per step: views, transposes), which each replay "
        "keeps after taking out its own profiler's cost; both are low (measured 5.25x; "
        "docs/validation.md)"),
    "scenarios/fp32-matmul/bad": (
        "fp32-matmul: after the fix the step sits where the GPU's time (7.1 ms) and the host's "
        "meet: nsys's replay keeps less host time than that and gives the GPU's floor, "
        "torch.profiler's keeps 8.9 ms and gives the host's; measured 6.54x lies between"),
    "scenarios-check/fp32-matmul/bad": (
        "fp32-matmul: after the fix the step sits where the GPU's time (4.4 ms) and the host's "
        "meet: nsys's replay keeps less host time than that and gives the GPU's floor, "
        "torch.profiler's keeps 5.6 ms and gives the host's; measured 6.75x lies between"),
    "scenarios/loader-jitter/bad": f"compiler-fusion {_THRESHOLD} (1.022x and 1.019x)",
    "scenarios/uncaptured-cuda-graph/good": (
        "the fixed step replays a CUDA graph, which nsys traces as one row per replay (its "
        "default --cuda-graph-trace=graph): the FP32 GEMMs inside are not visible to "
        "fp32-matmul; torch.profiler lists the graph's kernels one by one"),
    "scenarios-check/uncaptured-cuda-graph/good": (
        "the fixed step replays a CUDA graph, which nsys traces as one row per replay (its "
        "default --cuda-graph-trace=graph): the FP32 GEMMs inside are not visible to "
        "fp32-matmul; torch.profiler lists the graph's kernels one by one"),
    "public/hf-gpt2": (
        "fp32-matmul: after the fix the HF Trainer step is host-bound under nsys's replay (85.4 "
        "ms, host floor 75.0 ms) and GPU-bound under torch.profiler's (60.8 ms): the host time "
        "each keeps once its own profiler's cost is out differs; measured bf16 step 78.3 ms "
        "(2.50x), the nsys estimate is the right one"),
    "public/lightning-vit-b": (
        "compiler-fusion: Lightning runs forward and backward inside optimizer.step(closure); "
        "the torch.profiler capture has no forward or backward range there, its optimizer phase "
        "(Optimizer.step#, 99.5 of 193 ms) spans the closure and compiler-fusion leaves the "
        "optimizer's kernels out, while the nsys capture's phase ranges mark the backward "
        "inside it. fp32-matmul: both replays are host-bound after the fix, at the host time "
        "each keeps once its own profiler's cost is out (65.1 ms nsys, 81.6 ms torch.profiler, "
        "autocast's casts included; measured bf16-mixed 66.3 ms, 2.77x)"),
    "public/loader-imagenet": (
        "loader-jitter: two runs of a -j 0 loader whose step is mostly the training thread's "
        "batch decoding (822 and 702 ms per step); torch.profiler's estimate is held at the "
        "loader's production floor (60.0 ms), nsys's replay keeps 108.8 ms of the data phase "
        "over 7 workers. Measured at -j 7: 64.5 ms (11.7x): torch.profiler's is right; the part "
        "of the nsys data phase that should go is not isolated yet"),
    "scenarios-check/loader-jitter/good": (
        "loader-jitter: the fixed loader's torch.profiler capture still shows the GPU waiting "
        "1.27 ms per step in the data phase (the batch is prepared on the training thread, whose "
        "small operators torch.profiler records one by one), the nsys capture under the 2% "
        "minimum; a false finding of the torch.profiler side (tests/healthy_findings.py)"),
    "scenarios-check/unfused-gemm-gelu/bad": (
        f"unfused-gemm-gelu {_THRESHOLD} (1.028x and 1.010x); at this shape the fused epilogue "
        "measured 1.00x, so the nsys side is the right one (tests/test_rule_cases.py)"),
}
"""Pairs whose findings differ, with the cause (issue 37, item 3): the test holds each as a strict
xfail. Each cause was read off the two analyses (steps, floors, phases, traced rows)."""
