"""Second Nsight Systems captures of the H100 rule scenarios, for the gate's identical-code test.

Runs on the GPU machine from the repository root, after ``source .device-kit/nsys-env.sh``:

    python3 tests/gate/data/capture_repeats.py --out DIR host-sync loader-jitter ...

For each scenario and variant it runs ``benchmarks/scenarios/harness.py nsys`` under ``nsys
profile`` exactly as ``benchmarks/scenarios/capture.py`` does (same flags, same warm-up and 12
steps), exports the report to SQLite and gzips it to ``DIR/<scenario>/<variant>/nsys.sqlite.gz``:
the same code as the fixture in ``fixtures/scenarios``, captured again in a fresh process.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HARNESS = os.path.join(ROOT, "benchmarks", "scenarios", "harness.py")
NSYS_FLAGS = ["-t", "cuda,nvtx,osrt,cublas,cudnn", "--sample=none", "--cpuctxsw=none",
              "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-f", "true"]


def capture(scenario: str, variant: str, out: str) -> str | None:
    d = os.path.join(out, scenario, variant)
    os.makedirs(d, exist_ok=True)
    rep = os.path.join(d, "nsys")
    t0 = time.time()
    r = subprocess.run(["nsys", "profile", *NSYS_FLAGS, "-o", rep, sys.executable, HARNESS, "nsys",
                        "--scenario", scenario, "--variant", variant, "--out", d, "--warmup", "15"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    ok = r.returncode == 0 and os.path.exists(rep + ".nsys-rep")
    print(f"{scenario}/{variant}: {'ok' if ok else 'FAILED'} {time.time() - t0:.0f}s", flush=True)
    if not ok:
        print(r.stdout[-1500:], flush=True)
        return None
    return rep + ".nsys-rep"


def export(rep: str) -> str:
    sqlite = rep.replace(".nsys-rep", ".sqlite")
    subprocess.run(["nsys", "export", "--type", "sqlite", "-f", "true", "-o", sqlite, rep],
                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True)
    with open(sqlite, "rb") as src, gzip.open(sqlite + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(sqlite)
    os.remove(rep)
    return sqlite + ".gz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="bad,good")
    args = ap.parse_args()
    reps = [r for sc in args.scenarios for v in args.variants.split(",")
            if (r := capture(sc, v, args.out))]
    with cf.ThreadPoolExecutor(max_workers=8) as ex:
        for path in ex.map(export, reps):
            print(f"exported {os.path.relpath(path, args.out)}", flush=True)


if __name__ == "__main__":
    main()
