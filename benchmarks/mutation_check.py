"""Mutation check (issue 35): does each named mutation of a rule fail at least one NON-golden test?

    python benchmarks/mutation_check.py                 # every mutation, prints the table
    python benchmarks/mutation_check.py --list
    python benchmarks/mutation_check.py "GRAPH_LAUNCH_NS x10" "load-imbalance detection disabled"

Each mutation is a list of textual edits (file, old text, new text) applied to a temporary copy of
the repository (tracked files; ``fixtures/`` linked, not copied, and ``../shared`` beside it as
here). Then pytest runs, with ``-x``, only the modules that cover the mutated rule: never the
goldens (``tests/golden`` records whatever the code outputs, so a golden that notices proves
nothing), nor test_rule_cases' docs-table test, for the same reason (`NOT_GOLDEN`). The same tests
run on the unmutated copy first (a control): a test that fails there judges nothing.

The copy is imported ahead of the installed (editable) advisor: pytest puts its root first on
``sys.path`` (``pythonpath = ["."]``), and ``advisor/rules`` and ``advisor/report/templates`` are
linked to ``rules/`` and ``reports/templates/`` as pyproject.toml's ``package-dir`` maps them; the
script checks that the mutated module is the one imported before it trusts a run. An edit whose
old text is no longer in the file is reported as stale (the mutation must be rewritten), never
silently skipped.

The in-process twin of this check is tests/test_mutations.py and tests/job/test_job_mutations.py
(monkeypatch, one assertion per mutation); this script applies the edit to the source, as a
developer's change would, and lets the whole relevant suite judge it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.fixture_store import load_index  # noqa: E402  (the fixtures' traces, kept in git)

PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
          "--no-header", "-rf"]

NOT_GOLDEN = "not docs_table"
"""Left out like the goldens: test_rule_cases' docs-table test compares docs/validation.md's
table with what the code estimates now, so it notices any change, right or wrong."""
CASES = "tests/test_rule_cases.py"
PUBLIC = "tests/test_public_gain.py"


@dataclass(frozen=True)
class Mutation:
    name: str
    edits: tuple[tuple[str, str, str], ...]  # (file, old, new): each old text must occur once
    module: str  # the module the edits change, imported in the copy to check it is the copy's
    tests: tuple[str, ...]  # pytest arguments: the non-golden modules (and -k) covering it
    # Set where the feature is not claimed (README says why): its survival is expected, said in
    # the table, and does not fail the run.
    unclaimed: str = ""


MUTATIONS = (
    Mutation("rng-bound-dropout gain halved",
             (("rules/rng_bound_dropout.py", "effects=[DropOps(ids)],",
               "effects=[DropOps(ids, 0.5)],"),),
             "advisor.rules.rng_bound_dropout",
             (CASES, "-k", "rng-bound-dropout")),
    Mutation("GRAPH_LAUNCH_NS x10",
             (("advisor/engine/whatif.py", "GRAPH_LAUNCH_NS = 10_000", "GRAPH_LAUNCH_NS = 100_000"),),
             "advisor.engine.whatif",
             ("tests/engine/test_whatif.py", "tests/engine/test_floors.py", CASES, "-k",
              "uncaptured-cuda-graph or cpu-bound-loss or graph or whatif or floor")),
    Mutation("compiler-fusion SECOND_KEPT 0",
             (("rules/compiler_fusion.py", "SECOND_KEPT = 0.5", "SECOND_KEPT = 0.0"),),
             "advisor.rules.compiler_fusion",
             (CASES, PUBLIC, "-k", "compiler-fusion or compile")),
    Mutation("compiler-fusion SECOND_KEPT 1",
             (("rules/compiler_fusion.py", "SECOND_KEPT = 0.5", "SECOND_KEPT = 1.0"),),
             "advisor.rules.compiler_fusion",
             (CASES, PUBLIC, "-k", "compiler-fusion or compile")),
    Mutation("fp8-candidate FP8_GEMM_EFFICIENCY 1.08 -> 1.5",
             (("rules/fp8_candidate.py", "FP8_GEMM_EFFICIENCY = 1.08", "FP8_GEMM_EFFICIENCY = 1.5"),),
             "advisor.rules.fp8_candidate",
             (CASES, PUBLIC, "-k", "fp8")),
    Mutation("load-imbalance detection disabled",
             (("rules/job/load_imbalance.py",
               "if not job.pace or max(job.pace.values()) >= float(self.option(\"max-pace-share\")):",
               "if True:"),),
             "advisor.rules.job.load_imbalance",
             ("tests/job/test_load_imbalance.py", "tests/job/test_h200x2_traces.py")),
    Mutation("straggler-rank GPU-side saving halved",
             (("rules/job/straggler_rank.py",
               "effects=(JobEffect(closed, floor),),",
               "effects=(JobEffect(lambda r, st: closed(r, st, 0.5), floor),),"),),
             "advisor.rules.job.straggler_rank",
             ("tests/job/test_straggler_saving.py", "tests/job/test_h200x2_traces.py")),
    Mutation("DeepSpeed detection disabled",
             (("advisor/engine/framework.py", '"deepspeed": ("deepspeed",),', '"deepspeed": (),'),
              ("advisor/engine/framework.py", 're.compile(r"(?:^|/)deepspeed/runtime/")',
               're.compile(r"(?!)")'),
              ("advisor/engine/framework.py", 're.compile(r"^DeepSpeed(?:Engine|ZeroOptimizer\\w*)\\.")',
               're.compile(r"(?!)")')),
             "advisor.engine.framework",
             ("tests/engine/test_framework_detection.py", "tests/engine/test_framework_fixes.py"),
             unclaimed="no run of it was captured; README claims neither its detection nor its fixes"),
    Mutation("accelerate detection disabled",
             (("advisor/engine/framework.py", '"accelerate": ("accelerate",),', '"accelerate": (),'),
              ("advisor/engine/framework.py",
               're.compile(r"(?:^|/)accelerate/(?:accelerator|optimizer|data_loader)\\.py\\(")',
               're.compile(r"(?!)")')),
             "advisor.engine.framework",
             ("tests/engine/test_framework_detection.py", "tests/engine/test_framework_fixes.py"),
             unclaimed="no run of it was captured; README claims neither its detection nor its fixes"),
)


def copy_repo(dst: Path) -> None:
    """The tracked files (with the working tree's edits) into ``dst/repo``, fixtures/ hard-linked
    where the file system allows (100 MB; a symlinked folder would not do: tests/archive.py
    resolves paths and expects them under the checkout), ``dst/shared`` linked to the ``shared``
    beside the repository."""
    repo = dst / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                           text=True).stdout.split("\0")
    # and the fixtures' traces, which git keeps in its object store (tests/fixture_store.py)
    files += [f"fixtures/{rel}" for rel in load_index()]
    for rel in filter(None, files):
        if not (ROOT / rel).is_file():
            continue
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.startswith("fixtures/"):
            _link_or_copy(ROOT / rel, repo / rel)
        else:
            shutil.copy2(ROOT / rel, repo / rel)
    if (ROOT.parent / "shared").exists():
        (dst / "shared").symlink_to(ROOT.parent / "shared")
    # pyproject.toml's package-dir: advisor.rules is rules/, advisor.report.templates is
    # reports/templates/ (the installed editable finder would map them to the original tree)
    (repo / "advisor" / "rules").symlink_to(Path("..") / "rules")
    (repo / "advisor" / "report" / "templates").symlink_to(Path("..") / ".." / "reports" / "templates")


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def apply(repo: Path, m: Mutation) -> str | None:
    """Apply the edits; the reason it cannot be applied (stale old text), else None."""
    for rel, old, new in m.edits:
        path = repo / rel
        text = path.read_text()
        if text.count(old) != 1:
            return f"stale: {rel} has {text.count(old)} copies of {old!r}"
        path.write_text(text.replace(old, new))
    return None


def restore(repo: Path, m: Mutation) -> None:
    for rel, _, _ in m.edits:
        shutil.copy2(ROOT / rel, repo / rel)


def imported_from_copy(repo: Path, module: str) -> bool:
    """The module pytest will import is the copy's (the mutation is live)."""
    code = f"import {module} as m, os; print(os.path.realpath(m.__file__))"
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    return out.returncode == 0 and out.stdout.strip().startswith(str(repo.resolve()))


def _deselect(tests: tuple[str, ...]) -> list[str]:
    """The pytest arguments with `NOT_GOLDEN` added to (or as) the -k expression."""
    args = list(tests)
    if "-k" in args:
        i = args.index("-k") + 1
        args[i] = f"({args[i]}) and {NOT_GOLDEN}"
        return args
    return [*args, "-k", NOT_GOLDEN]


def pytest_run(repo: Path, tests: tuple[str, ...], timeout: int) -> tuple[str, list[str], float]:
    """("failed" / "passed" / why neither, failing test ids, seconds) of one pytest run."""
    t = time.monotonic()
    try:
        p = subprocess.run([*PYTEST, *_deselect(tests)], cwd=repo, capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "PYTHONPATH": str(repo)})
    except subprocess.TimeoutExpired:
        return f"timeout after {timeout} s", [], time.monotonic() - t
    dt = time.monotonic() - t
    failed = re.findall(r"^FAILED (\S+)", p.stdout, re.M)
    errors = re.findall(r"^ERROR (\S+)", p.stdout, re.M)
    if failed or errors:
        return "failed", failed + [f"{e} (error)" for e in errors], dt
    if p.returncode == 5:
        return "no tests selected", [], dt
    if p.returncode != 0:
        return f"pytest rc {p.returncode}: {p.stdout.strip().splitlines()[-1:]}", [], dt
    return "passed", [], dt


_CONTROL: dict[tuple[str, ...], tuple[str, list[str], float]] = {}


def run(repo: Path, m: Mutation, timeout: int) -> tuple[str, list[str], float]:
    """(outcome, failing test ids, seconds): outcome "caught", "survived", or why neither.

    The same tests run first on the unmutated copy (once per selection): a test that fails there
    says nothing about the mutation, and the mutation is then reported as not judged."""
    if m.tests not in _CONTROL:
        _CONTROL[m.tests] = pytest_run(repo, m.tests, timeout)
    control, failing, _ = _CONTROL[m.tests]
    if control != "passed":
        return f"not judged: unmutated, the tests {control} {', '.join(failing)}", [], 0.0
    reason = apply(repo, m)
    if reason:
        return reason, [], 0.0
    try:
        if not imported_from_copy(repo, m.module):
            return f"not live: {m.module} is not imported from the copy", [], 0.0
        outcome, failing, dt = pytest_run(repo, m.tests, timeout)
        return {"failed": "caught", "passed": "survived"}.get(outcome, outcome), failing, dt
    finally:
        restore(repo, m)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="only these mutations (default: all)")
    ap.add_argument("--list", action="store_true", help="print the mutations and their tests")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per mutation's pytest run")
    ap.add_argument("--check-edits", action="store_true",
                    help="only check that every edit's old text occurs once in this tree (exit 1 if not)")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"error: unknown mutation(s) {sorted(unknown)}; --list names them", file=sys.stderr)
        return 2
    if args.check_edits:
        stale = [f"{m.name}: {rel} has {(ROOT / rel).read_text().count(old)} copies of {old!r}"
                 for m in chosen for rel, old, _ in m.edits if (ROOT / rel).read_text().count(old) != 1]
        print("\n".join(stale) or f"{len(chosen)} mutations: every edit applies")
        return 1 if stale else 0
    if args.list:
        for m in chosen:
            print(f"{m.name}: {', '.join(e[0] for e in m.edits)} -> pytest {' '.join(m.tests)}")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        copy_repo(Path(tmp))
        repo = Path(tmp) / "repo"
        for m in chosen:
            outcome, failing, dt = run(repo, m, args.timeout)
            rows.append((m, outcome, failing, dt))
            print(f"[{m.name}] {outcome} ({dt:.0f} s): {', '.join(failing) or '-'}", flush=True)
    print("\n| mutation | outcome | failing non-golden tests (pytest -x: the first) |\n|---|---|---|")
    for m, outcome, failing, _ in rows:
        said = f"{outcome} (not claimed: {m.unclaimed})" if m.unclaimed and outcome == "survived" else outcome
        print(f"| {m.name} | {said} | {'<br>'.join(f'`{f}`' for f in failing) or '–'} |")
    return 0 if all(o == "caught" or m.unclaimed for m, o, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
