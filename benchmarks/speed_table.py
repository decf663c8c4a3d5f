"""Issue #39's table: every trace analysed, and N ranks on the local Dask cluster.

Two tables for docs/performance.md, both from fresh ``advisor analyze`` processes (start-up,
imports and the report included; console output to /dev/null):

* ``traces``: every trace in fixtures/ and ../shared/traces, one ``advisor analyze TRACE`` each:
  user+sys CPU seconds and peak RSS (``os.wait4``), then the median and the worst. CPU time,
  not wall: the machine is shared, and a run that waits for a core is not slower.
* ``ranks``: ``advisor analyze DIR`` over N copies (hard links) of a real rank trace, on the
  local Dask cluster (one worker per core): wall seconds, CPU seconds of the command and every
  process under it (the workers; ``os.wait4`` counts reaped children), and the peak of their
  summed resident memory (sampled every 50 ms). The seeds are the 2-GPU DDP job's nsys export
  (both ranks in one file, ``fixtures/jobs/h200x2-ddp/nsys/slow-rank.sqlite.gz``: N ranks are
  N/2 copies) and one of its torch.profiler ranks (N copies).

The machine's load average is printed beside every figure. ``--tree`` measures another checkout's
code (its ``advisor`` package first on ``PYTHONPATH``; ``rules/`` must sit at
``advisor/rules`` there, as ``git archive HEAD advisor rules`` and a move give) on the same
traces, for a before/after pair:

    python benchmarks/speed_table.py                          # both tables, this tree
    python benchmarks/speed_table.py --tables ranks --ranks 64,256,1024
    python benchmarks/speed_table.py --tree /tmp/before       # the same on older code
    python benchmarks/speed_table.py --tables paired --pair /tmp/before --over 1 --repeat 2

Reuses `analysis_scaling`'s trace list and `job_scale`'s process-tree sampler.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_scaling import REPO, SHARED, SUFFIXES

NSYS_SEED = REPO / "fixtures" / "jobs" / "h200x2-ddp" / "nsys" / "slow-rank.sqlite.gz"
KINETO_SEED = REPO / "fixtures" / "jobs" / "h200x2-ddp" / "torch" / "slow-rank" / "rank1.json.gz"
TRACE_TARGET_S = 1.0  # issue #39: every trace in <= 1 CPU s, start-up included
RANKS_TARGET_S = 60.0  # 1,024 ranks in <= 60 s on the local cluster
CLI = "import sys; from advisor.cli import run; sys.argv[0] = 'advisor'; run()"


def load() -> str:
    """The 1-minute load average now: each figure is only as quiet as the machine was."""
    return f"{os.getloadavg()[0]:.1f}"


def environment(tree: Path | None) -> dict[str, str]:
    """The child's environment: ``tree``'s advisor first on the path when one is given."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class TreeSampler:
    """Peak summed RSS of a process and everything under it, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.is_set():
            total = 0
            with contextlib.suppress(psutil.Error):
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
            self.peak = max(self.peak, total)
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_analyze(args: list[str], tree: Path | None, sample_tree: bool = False) -> dict:
    """One fresh ``advisor analyze ARGS``: exit status, wall s, user+sys CPU s (the process and
    its reaped children), peak RSS MB (its own, or with ``sample_tree`` the summed tree's)."""
    cwd = tempfile.gettempdir()  # not the repository: `python -c` puts the cwd on the path
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, "analyze", *args], cwd=cwd,
                            env=environment(tree), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid) if sample_tree else None
    err = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    peak = sampler.stop() if sampler else 0
    if proc.stderr:
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    rss = peak / 2**20 if sample_tree else usage.ru_maxrss / 1024
    return {"code": code, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mb": rss, "err": err.strip().splitlines()[-1] if code and err.strip() else ""}


def trace_paths() -> list[Path]:
    paths = [p for p in (REPO / "fixtures").rglob("*") if p.name.endswith(SUFFIXES)]
    if SHARED.exists():
        paths += [p for p in SHARED.rglob("*") if p.name.endswith(SUFFIXES)]
    return sorted(paths)


def label(p: Path) -> str:
    return str(p.relative_to(REPO)) if REPO in p.parents else "shared/" + str(p.relative_to(SHARED))


def table_traces(tree: Path | None, repeat: int, only: str | None) -> None:
    paths = [p for p in trace_paths() if only is None or only in str(p)]
    print(f"\n### Every trace: `advisor analyze TRACE` ({len(paths)} traces, fastest of {repeat})\n")
    print("| trace | MB | exit | user+sys s | peak RSS MB | load |")
    print("|---|---:|---:|---:|---:|---:|")
    cpu = []
    for p in paths:
        best = min((run_analyze([str(p)], tree) for _ in range(repeat)), key=lambda r: r["cpu_s"])
        cpu.append((best["cpu_s"], label(p)))
        note = f" {best['err'][:60]}" if best["err"] else ""
        print(f"| {label(p)} | {p.stat().st_size / 2**20:.1f} | {best['code']}{note} "
              f"| {best['cpu_s']:.2f} | {best['rss_mb']:.0f} | {load()} |", flush=True)
    if not cpu:
        return
    values = [c for c, _ in cpu]
    worst = max(cpu)
    under = sum(1 for c in values if c <= TRACE_TARGET_S)
    print(f"\n**median {statistics.median(values):.2f} CPU s, worst {worst[0]:.2f} s "
          f"({worst[1]}); {under} of {len(values)} at or under {TRACE_TARGET_S:g} s.**")


def table_paired(before: Path, repeat: int, only: str | None, over: float) -> None:
    """Each trace under the old tree and this one in turn (fastest of ``repeat`` each): on a
    shared machine a pair taken together is comparable where two tables taken an hour apart
    are not. ``over``: only the traces the old tree took longer than this on a first run."""
    paths = [p for p in trace_paths() if only is None or only in str(p)]
    print(f"\n### Paired: {before} then this tree, per trace (fastest of {repeat} each)\n")
    print("| trace | before user+sys s | after user+sys s | change | before / after peak RSS MB "
          "| load |")
    print("|---|---:|---:|---:|---:|---:|")
    pairs = []
    for p in paths:
        first = run_analyze([str(p)], before)
        if first["cpu_s"] <= over:
            continue
        runs: dict[str, list[dict]] = {"before": [first], "after": []}
        for i in range(2 * repeat - 1):
            side = "after" if i % 2 == 0 else "before"
            runs[side].append(run_analyze([str(p)], before if side == "before" else None))
        b = min(runs["before"], key=lambda r: r["cpu_s"])
        a = min(runs["after"], key=lambda r: r["cpu_s"])
        pairs.append((b["cpu_s"], a["cpu_s"]))
        print(f"| {label(p)} | {b['cpu_s']:.2f} | {a['cpu_s']:.2f} "
              f"| {(a['cpu_s'] / b['cpu_s'] - 1) * 100:+.0f}% | {b['rss_mb']:.0f} / {a['rss_mb']:.0f} "
              f"| {load()} |", flush=True)
    if pairs:
        ratio = statistics.median(a / b for b, a in pairs)
        print(f"\n**{len(pairs)} traces; median after/before {ratio:.3f}; worst after "
              f"{max(a for _, a in pairs):.2f} s.**")


def rank_dir(root: Path, seed: Path, copies: int) -> Path:
    """``copies`` of ``seed`` in a folder of their own (made once, reused): hard links of an
    nsys export (its ranks are told apart by file), and of a torch.profiler trace copies whose
    ``distributedInfo`` names rank i of ``copies`` (two traces claiming one rank are refused)."""
    d = root / f"{seed.name.split('.')[0]}-{copies}"
    if d.exists():
        return d
    tmp = root / f".{d.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    suffix = "".join(seed.suffixes)
    if seed.name.endswith(".json.gz"):
        text = gzip.decompress(seed.read_bytes())
        info = re.search(rb'"distributedInfo":\s*\{[^}]*?"rank":\s*(\d+),\s*"world_size":\s*(\d+)',
                         text)
        if info is None:
            raise SystemExit(f"{seed}: no distributedInfo rank to rewrite")
        a, b = info.span(1)
        c, e = info.span(2)
        for i in range(copies):
            body = text[:a] + str(i).encode() + text[b:c] + str(copies).encode() + text[e:]
            (tmp / f"rank{i:05d}{suffix}").write_bytes(gzip.compress(body, compresslevel=1))
    else:
        for i in range(copies):
            os.link(seed, tmp / f"rank{i:05d}{suffix}")
    tmp.rename(d)
    return d


def table_ranks(tree: Path | None, sizes: list[int], root: Path, seeds: list[str]) -> None:
    print("\n### Ranks: `advisor analyze DIR` on the local Dask cluster (one worker per core)\n")
    print("| seed | ranks | files | exit | wall s | CPU s, all processes | CPU ms per rank "
          "| peak memory MB | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in seeds:
        seed, per_file = (NSYS_SEED, 2) if kind == "nsys" else (KINETO_SEED, 1)
        for n in sizes:
            d = rank_dir(root, seed, max(1, n // per_file))
            r = run_analyze([str(d), "-q"], tree, sample_tree=True)
            note = f" {r['err'][:60]}" if r["err"] else ""
            print(f"| {kind} | {n} | {n // per_file} | {r['code']}{note} | {r['wall_s']:.1f} "
                  f"| {r['cpu_s']:.1f} | {r['cpu_s'] / n * 1000:.0f} | {r['rss_mb']:.0f} "
                  f"| {load()} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="traces,ranks")
    ap.add_argument("--tree", type=Path, help="measure this checkout's advisor instead")
    ap.add_argument("--repeat", type=int, default=1, help="runs per trace (the fastest kept)")
    ap.add_argument("--only", help="traces whose path contains this")
    ap.add_argument("--pair", type=Path, help="the old tree: each trace under it and this one "
                    "in turn (table 'paired')")
    ap.add_argument("--over", type=float, default=0.0,
                    help="paired: only traces the old tree took longer than this (CPU s)")
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--seeds", default="nsys,kineto")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "advisor-speed-ranks",
                    help="where the rank folders (hard links) are made and kept")
    args = ap.parse_args()
    tables = set(args.tables.split(","))
    tree = args.tree.resolve() if args.tree else None
    print(f"code: {tree or REPO}; cores: {os.cpu_count()}; load at start {load()}; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    if "traces" in tables:
        table_traces(tree, args.repeat, args.only)
    if "paired" in tables and args.pair:
        table_paired(args.pair.resolve(), args.repeat, args.only, args.over)
    if "ranks" in tables:
        table_ranks(tree, [int(x) for x in args.ranks.split(",")], args.dir,
                    args.seeds.split(","))
    print(f"\nended {time.strftime('%H:%M:%S UTC', time.gmtime())}, load {load()}")


if __name__ == "__main__":
    main()
