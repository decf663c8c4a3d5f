"""How fast, and in how much memory, large Nsight Systems exports load.

Builds exports of >= 1 GB and >= 5M kernel rows by repeating the steady-state steps of a real
capture (timestamps and correlation ids shifted, so every copy is a plausible later step), then
times `advisor.ingest.base.load_trace` on each, one fresh subprocess per measurement (wall time
and peak RSS from ``resource.getrusage``). nsys-ai, a peer tool reading the same exports, runs on
the same files for comparison (``nsys-ai summary``: it builds its Parquet cache and summarises
each GPU; its cache is removed before each run so both tools start cold).

    python benchmarks/ingest_speed.py                      # seed: a scenario capture or mfu_2gpu_before
    python benchmarks/ingest_speed.py --seed run.sqlite --sizes 0.25:1.25e6,1:5e6

Everything is written to a temporary directory (``--workdir`` to keep it), never into fixtures.
Files are measured right after being written, so the page cache is warm for both tools.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SEEDS = [
    *sorted((REPO / "fixtures" / "scenarios").glob("*/*/nsys.sqlite.gz")),
    REPO.parent / "shared" / "traces" / "nsys-ai" / "mfu_2gpu_before.sqlite",
]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
GB = 1 << 30

ADVISOR_PROBE = """
import json, resource, sys, time
from advisor.ingest.base import load_trace
t = time.perf_counter()
graph = load_trace(sys.argv[1])
wall = time.perf_counter() - t
print(json.dumps({"wall_s": wall,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "steps": len(graph.steps), "gpu_ops": len(graph.gpu_ops)}))
"""

NSYS_AI_PROBE = """
import contextlib, io, json, resource, sys, time
from nsys_ai.cli.app import main
path, command = sys.argv[1], sys.argv[2]
sys.argv = ["nsys-ai", command, path]
t = time.perf_counter()
out, code = io.StringIO(), 0
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
wall = time.perf_counter() - t
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
print(json.dumps({"wall_s": wall, "rss": rss, "exit": code}))
"""


@dataclass
class Built:
    path: Path
    size: int
    kernels: int
    label: str


@dataclass(frozen=True)
class Unit:
    """The repeated slice of the seed: [start, end) on its clock, and what it holds."""

    start: int
    end: int
    kernels: int
    steps: int
    correlation_span: int


# ----- building -----------------------------------------------------------------------------


def activity_tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Tables whose rows are timed events: CUPTI activities and NVTX (OSRT etc. are left as is)."""
    out = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        if not (name.startswith("CUPTI_ACTIVITY_KIND_") or name == "NVTX_EVENTS"):
            continue
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
        if {"start", "end"} <= set(cols):
            out[name] = cols
    return out


def find_unit(seed: Path, conn: sqlite3.Connection, tables: dict[str, list[str]]) -> Unit:
    """Steady steps of the seed (its step ranges after the first), or the whole seed."""
    from advisor.graph.model import StepSource
    from advisor.ingest.base import LoadOptions, load_trace

    graph = load_trace(seed, LoadOptions(max_steps=10**9))
    steps = [] if graph.step_source is StepSource.LAUNCH_PATTERN else graph.steps
    by_thread: dict[tuple[int, int], list] = {}
    for s in steps:
        by_thread.setdefault((s.pid, s.tid), []).append(s)
    if by_thread:
        main = sorted(max(by_thread.values(), key=len), key=lambda s: s.cpu_start_ns)[1:]
        start, end, n_steps = main[0].cpu_start_ns, main[-1].cpu_end_ns, len(main)
    else:
        spans = [conn.execute(f'SELECT min(start), max(end) FROM "{t}"').fetchone()
                 for t in tables]
        start = min(lo for lo, _ in spans if lo is not None)
        end = 1 + max(hi for _, hi in spans if hi is not None)
        n_steps = 0
    kernels = conn.execute(f'SELECT count(*) FROM "{KERNEL}" WHERE start >= ? AND start < ?',
                           (start, end)).fetchone()[0]
    lo, hi = 2**63, -(2**63)
    for t, cols in tables.items():
        if "correlationId" in cols:
            a, b = conn.execute(f'SELECT min(correlationId), max(correlationId) FROM "{t}"').fetchone()
            if a is not None:
                lo, hi = min(lo, a), max(hi, b)
    return Unit(start, end, kernels, n_steps, max(1, hi - lo + 1))


def column_exprs(table: str, cols: list[str]) -> str:
    """SELECT list of a shifted copy; parameters :dt (time), :dc (correlation), :ds (steps)."""
    exprs = []
    for c in cols:
        if c in ("start", "end"):
            exprs.append(f'"{c}" + :dt')
        elif c == "correlationId":
            exprs.append('"correlationId" + :dc')
        elif table == "NVTX_EVENTS" and c == "text":
            exprs.append("CASE WHEN text GLOB 'step [0-9]*' THEN 'step ' || "
                         "(CAST(substr(text, 6) AS INTEGER) + :ds) ELSE text END")
        else:
            exprs.append(f'"{c}"')
    return ", ".join(exprs)


def append_copies(conn: sqlite3.Connection, tables: dict[str, list[str]], unit: Unit,
                  have: int, add: int) -> None:
    """Append ``add`` units, copied from the first ``add`` ones, after the ``have`` present."""
    length = unit.end - unit.start
    params = {"dt": have * length, "dc": have * unit.correlation_span, "ds": have * unit.steps,
              "lo": unit.start, "hi": unit.start + add * length}
    for table, cols in tables.items():
        names = ", ".join(f'"{c}"' for c in cols)
        conn.execute(f'INSERT INTO "{table}" ({names}) SELECT {column_exprs(table, cols)} '
                     f'FROM "{table}" WHERE start >= :lo AND start < :hi', params)
    conn.commit()


def copy_seed(seed: Path, dst: Path) -> None:
    if seed.suffix == ".gz":
        with gzip.open(seed, "rb") as src, dst.open("wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    else:
        shutil.copyfile(seed, dst)
    dst.chmod(0o644)


def build(seed: Path, workdir: Path, targets: list[tuple[float, float]]) -> list[Built]:
    """Grow one copy of the seed past each (GB, kernels) target, keeping a file per target."""
    work = workdir / "growing.sqlite"
    copy_seed(seed, work)
    conn = sqlite3.connect(work)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    tables = activity_tables(conn)
    base = workdir / "seed.sqlite"
    shutil.copyfile(work, base)
    unit = find_unit(base, conn, tables)
    if unit.kernels == 0:
        sys.exit(f"{seed}: no kernels in its steady steps, nothing to repeat")
    for t in tables:  # drop the teardown after the unit: copies go there
        conn.execute(f'DELETE FROM "{t}" WHERE start >= ?', (unit.end,))
    conn.commit()
    kernels = conn.execute(f'SELECT count(*) FROM "{KERNEL}"').fetchone()[0]
    built = [Built(base, base.stat().st_size, count_kernels(base), f"seed ({seed.name})")]
    units = 1
    for i, (gb, target_kernels) in enumerate(sorted(targets)):
        while kernels < target_kernels or work.stat().st_size < gb * GB:
            need = math.ceil((target_kernels - kernels) / unit.kernels)
            if work.stat().st_size < gb * GB:
                per_unit = max(1, work.stat().st_size // units)
                need = max(need, math.ceil((gb * GB - work.stat().st_size) / per_unit))
            add = max(1, min(units, need))
            append_copies(conn, tables, unit, units, add)
            units += add
            kernels += add * unit.kernels
            print(f"  built {units} units: {kernels:,} kernels, "
                  f"{work.stat().st_size / GB:.2f} GB", file=sys.stderr)
        snapshot = workdir / f"trace_{i}.sqlite"
        shutil.copyfile(work, snapshot)
        built.append(Built(snapshot, snapshot.stat().st_size, kernels, f"x{units} steady slice"))
    conn.close()
    work.unlink()
    return built


def count_kernels(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if KERNEL not in names:
            return 0
        return conn.execute(f'SELECT count(*) FROM "{KERNEL}"').fetchone()[0]


# ----- measuring ----------------------------------------------------------------------------


def probe(code: str, args: list[str], timeout: float) -> dict:
    """Run one measurement in a fresh interpreter; its last stdout line is JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:.0f}s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": f"exit {done.returncode}: {tail[0][:80]}"}
    return json.loads(lines[-1])


def clear_nsys_ai_cache(path: Path) -> None:
    for extra in path.parent.glob(path.stem + ".nsys-cache*"):
        if extra.is_dir():
            shutil.rmtree(extra)
        else:
            extra.unlink()
    for staging in path.parent.glob(".parquet_build_*"):
        shutil.rmtree(staging, ignore_errors=True)


def measure(built: Built, nsys_ai: str | None, timeout: float, repeat: int = 1) -> dict:
    """advisor's fastest of ``repeat`` fresh runs (the machine is shared: the minimum is the
    run least disturbed by others), and one nsys-ai run."""
    runs = [probe(ADVISOR_PROBE, [str(built.path)], timeout) for _ in range(max(1, repeat))]
    timed = [r for r in runs if "error" not in r]
    row = {"advisor": min(timed, key=lambda r: r["wall_s"]) if timed else runs[0]}
    if nsys_ai:
        clear_nsys_ai_cache(built.path)
        row["nsys-ai"] = probe(NSYS_AI_PROBE, [str(built.path), nsys_ai], timeout)
        clear_nsys_ai_cache(built.path)
    return row


def cell(result: dict | None, key: str) -> str:
    if result is None:
        return "-"
    if "error" in result:
        return result["error"] if key == "wall_s" else "-"
    if key == "wall_s":
        return f"{result['wall_s']:.1f} s"
    return f"{result['rss'] / GB:.2f} GB" if result["rss"] >= GB / 4 else \
        f"{result['rss'] / (1 << 20):.0f} MB"


def print_table(rows: list[tuple[Built, dict]], nsys_ai: str | None) -> None:
    tool = f"nsys-ai {nsys_ai}" if nsys_ai else "nsys-ai"
    print(f"| trace | size | kernels | advisor time | advisor peak RSS | {tool} time "
          f"| {tool} peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for built, r in rows:
        size = f"{built.size / GB:.2f} GB" if built.size >= GB / 10 else \
            f"{built.size / (1 << 20):.1f} MB"
        print(f"| {built.label} | {size} | {built.kernels:,} | {cell(r['advisor'], 'wall_s')} "
              f"| {cell(r['advisor'], 'rss')} | {cell(r.get('nsys-ai'), 'wall_s')} "
              f"| {cell(r.get('nsys-ai'), 'rss')} |")


def parse_sizes(text: str) -> list[tuple[float, float]]:
    """``0.25:1.25e6,1:5e6`` -> [(GB, kernels), ...]."""
    out = []
    for part in text.split(","):
        gb, kernels = part.split(":")
        out.append((float(gb), float(kernels)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=Path, help="a real export to repeat (.sqlite or .gz)")
    parser.add_argument("--sizes", default="0.25:1.25e6,1:5e6",
                        help="targets as GB:kernels, comma-separated (default %(default)s)")
    parser.add_argument("--nsys-ai", default="summary",
                        help="nsys-ai subcommand to compare with, or 'none' (default summary)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per measurement")
    parser.add_argument("--workdir", type=Path, help="keep the built files here")
    parser.add_argument("--repeat", type=int, default=1,
                        help="advisor runs per file, the fastest kept (default %(default)s)")
    args = parser.parse_args()
    seed = args.seed or next((p for p in DEFAULT_SEEDS if p.exists()), None)
    if seed is None:
        sys.exit("no seed export found: pass --seed")
    nsys_ai = None if args.nsys_ai == "none" else args.nsys_ai
    if nsys_ai and shutil.which("nsys-ai") is None:
        print("nsys-ai not installed (pip install nsys-ai): its columns stay empty",
              file=sys.stderr)
        nsys_ai = None
    with tempfile.TemporaryDirectory(prefix="advisor-ingest-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if workdir.resolve() == seed.resolve().parent:
            # nsys-ai writes caches and lock files beside what it reads: it only ever runs on
            # the copies built in the workdir, never beside the seed (e.g. ../shared/traces).
            sys.exit("--workdir must not be the seed's directory: peer tools write beside "
                     "their input")
        print(f"seed {seed}; building in {workdir}", file=sys.stderr)
        rows = []
        for built in build(seed, workdir, parse_sizes(args.sizes)):
            print(f"measuring {built.path.name} ({built.size / GB:.2f} GB)", file=sys.stderr)
            rows.append((built, measure(built, nsys_ai, args.timeout, args.repeat)))
        print_table(rows, nsys_ai)


if __name__ == "__main__":
    main()
