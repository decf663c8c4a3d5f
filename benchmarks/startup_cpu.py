"""Start-up of `advisor analyze`, old tree against new, paired: CPU seconds of fresh processes.

Issue #39 wants a small trace analysed in well under a CPU second, and on a small export most
of advisor's CPU is its start-up. Each round runs every command under the old tree and then
the new one (alternating, so both see the same load), and the fastest of ``--repeat`` rounds
is kept: user+sys CPU seconds of the process (``os.wait4``), the figure the issue's targets use.
The commands:

* ``python -c pass``: the interpreter alone (the floor under every figure);
* ``import advisor.cli, advisor.commands.analyze``: what `advisor analyze` imports before it
  reads the trace;
* ``advisor analyze TRACE`` (console output to /dev/null) for each TRACE given.

A tree is a directory whose ``advisor`` package goes first on ``PYTHONPATH`` (its rules at
``advisor/rules``, as ``git archive REV advisor rules`` and a move give, or an installed
checkout's). For bytecode as a pip install has it, run with ``PYTHONPYCACHEPREFIX`` set and
``PYTHONDONTWRITEBYTECODE`` unset, and once before measuring (the first run compiles):

    git archive main advisor rules reports | tar -x -C /tmp/before
    mv /tmp/before/rules /tmp/before/advisor/rules
    mv /tmp/before/reports/templates /tmp/before/advisor/report/templates
    cd /tmp && env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc \\
        python /path/to/benchmarks/startup_cpu.py --old /tmp/before --new /path/to/tree \\
        --repeat 5 TRACE...

Run it from outside both trees: ``python -c`` puts the working directory first on
``sys.path``. A markdown table on stdout, with the load average of each row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CLI = "import sys; from advisor.cli import run; sys.argv[0] = 'advisor'; run()"
IMPORT = "import advisor.cli, advisor.commands.analyze"


def cpu_seconds(tree: Path, argv: list[str]) -> float:
    """User+sys CPU seconds of one fresh process of ``argv`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} under {tree}: exit status {status}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the tree before")
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the tree after (default: this checkout)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (the fastest is kept)")
    ap.add_argument("traces", nargs="*", type=Path)
    args = ap.parse_args()
    rows = [("python -c pass", [sys.executable, "-c", "pass"]),
            ("import advisor.cli, advisor.commands.analyze", [sys.executable, "-c", IMPORT])]
    rows += [(f"advisor analyze {'/'.join(t.parts[-3:])}",
              [sys.executable, "-c", CLI, "analyze", str(t.resolve())]) for t in args.traces]
    print("| command | before CPU s | after CPU s | after / before | load |")
    print("|---|---:|---:|---:|---:|")
    for label, argv in rows:
        for tree in (args.old, args.new):  # a first, compiling run of each: not measured
            cpu_seconds(tree, argv)
        best = {args.old: float("inf"), args.new: float("inf")}
        for _ in range(args.repeat):
            for tree in (args.old, args.new):
                best[tree] = min(best[tree], cpu_seconds(tree, argv))
        old, new = best[args.old], best[args.new]
        print(f"| `{label}` | {old:.3f} | {new:.3f} | {new / old:.2f} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
