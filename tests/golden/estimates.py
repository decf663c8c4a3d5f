"""Every what-if estimate on every real trace we have, for the golden test beside it.

The what-if engine is an optimisation target (issue #17): its results must not move while it gets
faster. This records, per trace in ``fixtures/`` and ``../shared/traces``, every finding's
estimate (speedup, low, high, predicted step), the combined estimate, and the replayed baseline
(observed and unprofiled step periods). The fixtures are the test traces `fixtures/manifest.toml`
lists, not the evidence archive (`fixtures/archive/`). The golden file is written only on
request, after review:

    python tests/golden/estimates.py --write      # regenerate tests/golden/estimates.json
    python tests/golden/estimates.py TRACE...     # print the record of some traces

The test (`test_estimates.py`) never rewrites it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script (`python tests/golden/...`): `tests` importable
    sys.path.insert(0, str(ROOT))
SHARED_TRACES = ROOT.parent / "shared" / "traces"
GOLDEN = Path(__file__).with_name("estimates.json")
SUFFIXES = (".sqlite", ".sqlite.gz", ".json.gz")


def trace_keys() -> list[str]:
    """Paths of the traces, relative to the repository root (shared ones start with ``../``):
    the manifest's test traces, then every trace in ../shared/traces."""
    from tests.fixture_manifest import trace_keys as fixture_keys

    keys = fixture_keys()
    if SHARED_TRACES.exists():
        keys += ["../shared/traces/" + str(p.relative_to(SHARED_TRACES))
                 for p in SHARED_TRACES.rglob("*") if p.name.endswith(SUFFIXES)]
    return sorted(keys)


def _estimate(e) -> dict:
    return {"speedup": e.speedup, "low": e.low, "high": e.high,
            "step_ns": e.step_ns, "predicted_step_ns": e.predicted_step_ns}


def analyse(key: str):
    """The default analysis of one trace, or the `AdvisorError` it stops with."""
    from advisor.analysis import analyze
    from advisor.errors import AdvisorError

    try:
        return analyze(ROOT / key)
    except AdvisorError as exc:
        return exc


def record(key: str, analysis=None) -> dict:
    """What the analysis of one trace (``analysis``, else analysed here) estimates, or the
    class of error it stops with."""
    from advisor.errors import AdvisorError

    analysis = analyse(key) if analysis is None else analysis
    if isinstance(analysis, AdvisorError):
        return {"error": type(analysis).__name__}
    r = analysis.results
    out: dict = {
        "steps": r.steps_analysed,
        "findings": {f"{f.rule}#{i}": _estimate(f.estimate) for i, f in enumerate(
            sorted(r.findings + r.below_threshold, key=lambda f: (f.rule, f.message)))},
        "combined": _estimate(r.combined) if r.combined else None,
        "unprofiled_median_ns": r.replay.unprofiled_median_ns,
        "unprofiled_mean_ns": r.replay.unprofiled_mean_ns,
        "profiler_overhead_ns": r.replay.profiler_overhead_ns,
    }
    graph, ctx = analysis.graph, analysis.context
    if ctx.steps and graph.has_gpu_work:
        out["observed_periods"] = list(ctx.observed.periods)
        out["unprofiled_periods"] = list(ctx.baseline.periods)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help="keys to print (default: all)")
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = parser.parse_args()
    keys = args.traces or trace_keys()
    data = {}
    for key in keys:
        print(key, file=sys.stderr)
        data[key] = record(key)
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
