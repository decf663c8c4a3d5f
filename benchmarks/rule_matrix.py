"""Rule x healthy-trace matrix: every rule on every fixed capture and healthy real trace.

A healthy step must come out clean: a finding above the reporting threshold on any of these
traces is false unless the fix it names was applied to that step and timed. The set
(tests/validation_data.healthy_traces):

* ``fixtures/scenarios/<rule>/good/`` and ``fixtures/scenarios-check/<rule>/good/``: each
  scenario's fixed variant, both formats;
* the real trace from ``../shared/traces`` that its source describes as the optimised variant:
  nsys-ai's ``mfu_2gpu_after`` (after its MFU fix, 2x H100).

Not in the set, on purpose: ``fixtures/cuda-graphs`` (its script plants pageable copies and a
CPU-generated batch on the main thread), the resnet50 ``num_workers=4`` trace (FP32 on a V100,
pageable input copies: the loader fix leaves those real findings), and the other shared traces
(demonstrations of problems, or workloads nobody has judged healthy).

There is no allowlist (issue 35): the findings raised here that no measurement backs are listed
in tests/healthy_findings.py (``u`` in the matrix) and fail tests/test_rule_matrix.py as strict
xfails; anything else (``!``) fails it outright.

    python benchmarks/rule_matrix.py             # the matrix; exit 1 on an unlisted finding
    python benchmarks/rule_matrix.py --markdown  # the table of listed findings in docs/validation.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.healthy_findings import FIX, MEASURED, MISSED, UNMEASURED  # noqa: E402
from tests.validation_data import gain_bound, healthy_traces, label, saving  # noqa: E402


def matrix(paths: list[Path]) -> dict[str, dict[str, float]]:
    """trace -> rule -> speedup, for every finding and every below-threshold match."""
    from advisor.analysis import analyze

    out: dict[str, dict[str, float]] = {}
    for p in paths:
        r = analyze(p).results
        row = {f"{f.rule}": f.estimate.speedup for f in r.findings}
        row |= {f"({f.rule})": f.estimate.speedup for f in r.below_threshold}
        out[label(p)] = row
    return out


def print_markdown(m: dict[str, dict[str, float]]) -> None:
    print("| healthy trace | rule | estimate | status | fix to time, or its timing |")
    print("|---|---|---|---|---|")
    for (trace, rule), why in sorted(UNMEASURED.items()):
        est = f"{m[trace][rule]:.2f}x" if trace in m and rule in m[trace] else "not raised"
        fix = FIX[rule] if trace.startswith("scenarios") else "none: a third party's trace"
        print(f"| `{trace}` | {rule} | {est} | strict xfail: {why} | {fix} |")
    for (trace, rule), t in sorted({**MEASURED, **MISSED}.items()):
        meas = t.speedup()
        low, high = t.spread()
        est = f"{m[trace][rule]:.2f}x" if trace in m and rule in m[trace] else "not raised"
        timed = f"timed: `fixtures/archive/public/{t.folder}/{t.stem}-*`"
        if t.false:
            status = (f"measured false finding: {meas:.3f}x on the {t.machine} ({low:.2f}-{high:.2f}x "
                      "between runs); " + ("strict xfail: the rule must not raise it"
                                           if est != "not raised" else "no longer raised"))
            print(f"| `{trace}` | {rule} | {est} | {status} | {timed} |")
            continue
        if trace in m and rule in m[trace]:
            err = (saving(m[trace][rule]) - saving(meas)) / saving(meas)
            est = f"{m[trace][rule]:.2f}x"
            within = "within" if abs(err) <= gain_bound(rule) else "outside"
            verdict = f"gain {err:+.0%}, {within} the {gain_bound(rule):.0%} bound"
        else:
            est, verdict = "not raised", "a missed true finding"
        status = f"measured true finding: {meas:.3f}x on the {t.machine} ({verdict})"
        if t.miss:
            status += "; strict xfail"
        print(f"| `{trace}` | {rule} | {est} | {status} | {timed} |")


def main() -> int:
    from advisor.engine.registry import load_rules

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print the table of listed findings")
    args = ap.parse_args()
    m = matrix(healthy_traces())
    if args.markdown:
        print_markdown(m)
        return 0
    rules = [r.name for r in load_rules()]
    width = max(len(k) for k in m)
    print(f"{'trace':{width}} " + " ".join(f"{r[:10]:>10}" for r in rules))
    bad = listed = measured = 0
    for trace, row in m.items():
        cells = []
        for r in rules:
            if r in row:
                known = (trace, r) in UNMEASURED
                timed = (trace, r) in MEASURED
                cells.append(f"{row[r]:.2f}x" + ("u" if known else "m" if timed else "!"))
                bad += not known and not timed
                listed += known
                measured += timed
            elif f"({r})" in row:
                cells.append(f"({row[f'({r})']:.3f})")
            else:
                cells.append(".")
        print(f"{trace:{width}} " + " ".join(f"{c:>10}" for c in cells))
    print(f"\n{len(m)} traces x {len(rules)} rules: {listed} unmeasured findings (u: listed in "
          f"tests/healthy_findings.py, a strict xfail each), {measured} measured findings "
          f"(m: true or false, tests/healthy_findings.py MEASURED), {bad} unlisted (!); "
          f"parenthesised: below the threshold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
