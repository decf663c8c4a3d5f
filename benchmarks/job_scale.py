"""Multi-rank analysis at scale: wall time and peak memory of `advisor analyze` over N ranks.

Makes N synthetic rank traces from a real torch.profiler trace (`rank_synth`: real event counts
and names, per-rank clock offsets, a planted straggler and exposed collectives), then runs the
whole job analysis on the local Dask cluster (one worker per core) and prints a table:

    python benchmarks/job_scale.py --ranks 2,8,32,128,256 [--no-rank-rules] [--dir /tmp/ranks]

Peak memory is the largest sum of resident memory over this process and every process under it
(the Dask scheduler runs in this process, the workers are its children), sampled every 100 ms.
The check: the straggler and the planted waiting must come out of every run.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.job.api import analyze_job
from tests.rank_synth import load_base, write_ranks


class PeakMemory:
    """Peak resident memory of this process and its children, and the CPU seconds they used."""

    def __init__(self) -> None:
        self.peak = 0
        self.cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
            self.peak = max(self.peak, total)
            time.sleep(0.1)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())

    def __enter__(self) -> PeakMemory:
        me = psutil.Process().cpu_times()
        self._base = me.user + me.system
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        me = psutil.Process().cpu_times()
        self.cpu[psutil.Process().pid] = me.user + me.system - self._base


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,8,32,128,256")
    ap.add_argument("--dir", default="/tmp/advisor-job-scale")
    ap.add_argument("--rank-rules", default="sample", choices=("sample", "all", "none"))
    ap.add_argument("--distinct", type=int, default=16, help="different rank files; the rest hard links")
    ap.add_argument("--straggler", type=int, default=1)
    ap.add_argument("--delay-us", type=float, default=2000.0)
    args = ap.parse_args()
    sizes = [int(x) for x in args.ranks.split(",")]
    out = Path(args.dir)
    have = sorted(out.glob("rank*.json.gz")) if out.exists() else []
    if len(have) < max(sizes):
        t = time.perf_counter()
        write_ranks(out, max(sizes), straggler=args.straggler, delay_us=args.delay_us,
                    exposed_us=500.0, base=load_base(), distinct=args.distinct)
        print(f"wrote {max(sizes)} rank traces in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    files = [out / f"rank{r}.json.gz" for r in range(max(sizes))]
    mb = sum(f.stat().st_size for f in files[:1]) / 1e6
    print(f"per-rank trace: {mb:.2f} MB gzip; per-rank rules: {args.rank_rules}; "
          f"cores: {psutil.cpu_count()}; load average at start: {psutil.getloadavg()[0]:.1f}")
    print("| ranks | wall s | CPU s (all processes) | CPU s per rank | peak memory MB | job step ms | "
          "straggler | waiting ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        with PeakMemory() as mem:
            t = time.perf_counter()
            job = analyze_job(files[:n], rank_rules=args.rank_rules)
            wall = time.perf_counter() - t
        s = job.straggler
        ok = s is not None and s.rank == args.straggler
        waiting = s.others_waiting_ns / 1e6 if s else 0.0
        print(f"| {n} | {wall:.1f} | {mem.cpu_s:.0f} | {mem.cpu_s / n:.2f} | {mem.peak / 1e6:.0f} | "
              f"{job.step_ns / 1e6:.1f} | "
              f"{s.rank if s else '-'}{'' if ok else ' (WRONG)'} | {waiting:.1f} |", flush=True)


if __name__ == "__main__":
    main()
