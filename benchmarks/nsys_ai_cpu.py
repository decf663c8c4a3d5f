"""advisor against nsys-ai in CPU seconds, on every nsys export in fixtures/manifest.toml.

Issue #39 asks for advisor at >= 3x nsys-ai in CPU time on the median of the nsys fixtures. Each
export is unpacked once into a scratch folder (nsys-ai reads a bare ``.sqlite`` only), and both
tools read that same file, each in a fresh process:

* ``advisor analyze FILE`` (console report to /dev/null), this tree's code;
* ``nsys-ai diagnose FILE --format json`` (its one-shot analysis: the default skill pack's
  ranked findings), from its own virtual environment (``--nsys-ai``, default
  /work/venvs/nsysai/bin/nsys-ai; install it there, never beside advisor:
  ``pip download -d /tmp/nsysai-whl nsys-ai==0.3.0`` then
  ``python -m venv /work/venvs/nsysai && /work/venvs/nsysai/bin/pip install --no-index
  --find-links /tmp/nsysai-whl nsys-ai==0.3.0``).

CPU is user + system of the process and every child it reaped (``os.wait4``), so a network or
disk wait is not counted; the fastest of ``--repeat`` runs is kept.

**Bytecode.** This machine's environment sets ``PYTHONDONTWRITEBYTECODE=1`` and advisor is
installed editable, so every ``advisor`` process compiles its modules from source (about 0.1 s
of a small export's run); nsys-ai, installed from its wheel, has its ``.pyc`` files (pip compiles
them at install), as a pip-installed advisor would. advisor is therefore timed twice: as the
environment runs it, and with a private bytecode cache (``PYTHONPYCACHEPREFIX`` in the scratch
folder, filled by one untimed run first), the state of an installed advisor. nsys-ai writes a Parquet
cache and a session beside its input and under ``$HOME``: every nsys-ai run gets a fresh copy of
the export in its own folder and a fresh ``HOME``, so each is a first analysis (``--warm`` also
times a second run on the same copy, the cache built). Nothing is written under fixtures/.

    python benchmarks/nsys_ai_cpu.py [--repeat 2] [--only scenarios/] [--warm]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixture_manifest import FIXTURES, fixtures  # noqa: E402

CLI = "import sys; from advisor.cli import run; sys.argv[0] = 'advisor'; run()"
TARGET = 3.0


def cpu_run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, float]:
    """(exit status, user+sys CPU s of the process and its reaped children)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def unpacked(src: Path, into: Path) -> Path:
    """The export as a bare ``.sqlite`` in ``into`` (one folder per export: names repeat)."""
    into.mkdir(parents=True, exist_ok=True)
    out = into / (src.name.removesuffix(".gz"))
    if not out.exists():
        if src.name.endswith(".gz"):
            with gzip.open(src, "rb") as f, out.open("wb") as g:
                shutil.copyfileobj(f, g, 1 << 20)
        else:
            shutil.copyfile(src, out)
    return out


def advisor_cpu(export: Path, scratch: Path, pyc: Path | None = None) -> tuple[int, float]:
    """``advisor analyze``; with ``pyc``, its bytecode cached there (see the module's notes)."""
    env = None
    if pyc is not None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(pyc)
    return cpu_run([sys.executable, "-c", CLI, "analyze", str(export)], cwd=scratch, env=env)


def nsys_ai_cpu(tool: str, export: Path, scratch: Path, warm: bool) -> tuple[int, float, float]:
    """(exit status, first run's CPU s, a second run's CPU s or nan): a fresh copy and HOME."""
    run_dir = Path(tempfile.mkdtemp(dir=scratch, prefix="nsysai-"))
    try:
        copy = run_dir / export.name
        shutil.copyfile(export, copy)
        home = run_dir / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
               "XDG_CONFIG_HOME": str(home / ".config")}
        argv = [tool, "diagnose", str(copy), "--format", "json"]
        code, first = cpu_run(argv, run_dir, env)
        second = cpu_run(argv, run_dir, env)[1] if warm else float("nan")
        return code, first, second
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsys-ai", default="/work/venvs/nsysai/bin/nsys-ai")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", help="exports whose path contains this")
    ap.add_argument("--warm", action="store_true", help="also time nsys-ai's second run")
    args = ap.parse_args()
    if not Path(args.nsys_ai).exists():
        raise SystemExit(f"{args.nsys_ai}: no nsys-ai there (see this script's docstring)")
    exports = [f for f in fixtures() if f.format == "nsys-sqlite"
               and (args.only is None or args.only in f.path)]
    print(f"{len(exports)} nsys exports; cores {os.cpu_count()}; load at start "
          f"{os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n")
    print("| export | MB | advisor s, compiling | advisor s, bytecode | nsys-ai s | ratio "
          "(bytecode) |" + (" nsys-ai warm s |" if args.warm else "") + " load |")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|" if args.warm else "") + "---:|")
    cold, ours, theirs = [], [], []
    with tempfile.TemporaryDirectory(prefix="advisor-vs-nsysai-") as tmp:
        scratch = Path(tmp)
        pyc = scratch / "pyc"
        for i, f in enumerate(exports):
            export = unpacked(FIXTURES / f.path, scratch / f"e{i}")
            if i == 0:
                advisor_cpu(export, scratch, pyc)  # fills the bytecode cache, untimed
            c_runs, a_runs, n_runs = [], [], []
            for _ in range(args.repeat):
                c_runs.append(advisor_cpu(export, scratch))
                a_runs.append(advisor_cpu(export, scratch, pyc))
                n_runs.append(nsys_ai_cpu(args.nsys_ai, export, scratch, args.warm))
            c = min(t for _, t in c_runs)
            a = min(t for _, t in a_runs)
            n = min(r[1] for r in n_runs)
            codes = {k for k, _ in c_runs + a_runs} | {r[0] for r in n_runs}
            note = "" if codes == {0} else f" (exit {sorted(codes)})"
            cold.append(c)
            ours.append(a)
            theirs.append(n)
            warm = f" {min(r[2] for r in n_runs):.2f} |" if args.warm else ""
            print(f"| {f.path}{note} | {export.stat().st_size / 2**20:.1f} | {c:.2f} | {a:.2f} "
                  f"| {n:.2f} | {n / a:.1f}x |{warm} {os.getloadavg()[0]:.1f} |", flush=True)
    med_c, med_a, med_n = (statistics.median(x) for x in (cold, ours, theirs))
    print(f"\n**median CPU s: nsys-ai {med_n:.2f}; advisor {med_a:.2f} with bytecode "
          f"({med_n / med_a:.2f}x), {med_c:.2f} compiling its modules ({med_n / med_c:.2f}x); "
          f"target {TARGET:g}x**")


if __name__ == "__main__":
    main()
