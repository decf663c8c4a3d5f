"""Two versions of advisor on the same traces, alternating: the benchmark's probe and `advisor analyze`.

On a shared machine the load moves within minutes, so a "before" table taken an hour before the
"after" one compares the machine, not the code. Here each round runs the old tree, then the new
one, on every trace, and the fastest of ``--repeat`` rounds is kept for each:

* the probe of `analysis_scaling.measure` (load and analyse, no report), with its ``REPO``
  pointed at each tree in turn;
* ``advisor analyze TRACE`` with its console output (to /dev/null), the command a user runs,
  as ``python -c "...main()"`` with ``PYTHONPATH`` the tree.

Wall s / user+sys s / peak RSS MB from ``os.wait4``; a markdown table on stdout, the load
average on stderr. Run it from outside both trees (``cd /tmp``): ``python -c`` puts the working
directory first on ``sys.path``.

    git worktree add /tmp/before <commit>
    cd /tmp && python /path/to/benchmarks/before_after.py --old /tmp/before TRACE...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import analysis_scaling as bench  # the same probe as the scaling tables

NEW = Path(__file__).resolve().parents[1]
MAIN = ("import sys; import advisor.cli as c; "
        "c.run() if hasattr(c, 'run') else sys.exit(c.main())")
"""What the ``advisor`` console script runs in either tree (``advisor.cli:run`` since the
seventh pass, ``advisor.cli:main`` before it)."""


def analyze_command(tree: Path, trace: Path) -> dict:
    """One fresh ``advisor analyze TRACE`` of ``tree``, console output discarded."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", MAIN, "analyze", str(trace)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        return {"error": f"exit {status}"}
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def probe(tree: Path, trace: Path) -> dict:
    bench.REPO = tree  # `measure` puts REPO first on PYTHONPATH
    try:
        return bench.measure(trace, repeat=1)
    finally:
        bench.REPO = NEW


def cell(row: dict) -> str:
    if "error" in row:
        return row["error"]
    return f"{row['wall_s']:.2f} / {row['cpu_s']:.2f} / {row['rss_mb']:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--old", type=Path, required=True, help="the other tree (a worktree)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (fastest kept)")
    args = parser.parse_args()
    print(f"{bench.load_note()} at {time.strftime('%H:%M:%S', time.gmtime())} UTC", file=sys.stderr)
    print("| trace | window ops | probe before | probe after | analyze before | analyze after |")
    print("|---|---:|---:|---:|---:|---:|")
    for trace in args.traces:
        runs: dict[str, list[dict]] = {k: [] for k in ("probe old", "probe new", "cli old", "cli new")}
        for _ in range(args.repeat):
            for label, tree in (("old", args.old), ("new", NEW)):
                runs[f"probe {label}"].append(probe(tree, trace))
                runs[f"cli {label}"].append(analyze_command(tree, trace))
        best = {k: min(v, key=lambda r: r.get("wall_s", float("inf"))) for k, v in runs.items()}
        ops = best["probe new"].get("window_ops", 0)
        print(f"| {trace} | {ops:,} | {cell(best['probe old'])} | {cell(best['probe new'])} "
              f"| {cell(best['cli old'])} | {cell(best['cli new'])} |", flush=True)
    print(f"{bench.load_note()} at {time.strftime('%H:%M:%S', time.gmtime())} UTC", file=sys.stderr)


if __name__ == "__main__":
    main()
