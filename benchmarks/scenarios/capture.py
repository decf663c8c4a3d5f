"""Driver: for each scenario and variant, in fresh processes and in this order,
(1) timing, (2) torch.profiler trace, (3) Nsight Systems capture; then the nsys
SQLite exports (run at the end, in parallel, so they never overlap a measurement).

    source .device-kit/nsys-env.sh     # puts nsys on PATH (GPU machine)
    python3 benchmarks/scenarios/capture.py --out /tmp/res host-sync fp32-matmul

Writes <out>/<scenario>/<variant>/{timing.json, trace.json.gz, nsys_timing.json,
nsys.sqlite.gz, *.log} and <out>/summary.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "harness.py")
ALL = [
    "cpu-bound-loss", "loader-jitter", "rng-bound-dropout", "unfused-attention",
    "unfused-gemm-gelu", "uncaptured-cuda-graph", "pageable-memcpy", "host-sync",
    "fp32-matmul", "fp8-candidate", "compiler-fusion", "gemm-shape-alignment",
]
NSYS_FLAGS = ["-t", "cuda,nvtx,osrt,cublas,cudnn", "--sample=none", "--cpuctxsw=none",
              "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-f", "true"]


def sh(cmd, log, timeout):
    t0 = time.time()
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = -9
    dt = time.time() - t0
    with open(log) as f:
        tail = f.read()[-1500:]
    status = "ok" if rc == 0 else f"FAILED rc={rc}"
    print(f"  {os.path.basename(log):28s} {status} {dt:6.1f}s", flush=True)
    if rc != 0:
        print(tail, flush=True)
    return rc


def gzip_file(src, dst):
    with open(src, "rb") as fi, gzip.open(dst, "wb", compresslevel=6) as fo:
        shutil.copyfileobj(fi, fo, 1 << 20)
    os.remove(src)


def export_job(rep, sqlite_path):
    r = subprocess.run(["nsys", "export", "--type", "sqlite", "-f", "true", "-o", sqlite_path, rep],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not os.path.exists(sqlite_path):
        return rep, f"export failed rc={r.returncode}: {r.stdout[-800:]}"
    size = os.path.getsize(sqlite_path)
    gzip_file(sqlite_path, sqlite_path + ".gz")
    os.remove(rep)
    return rep, f"ok sqlite {size / 1e6:.1f} MB -> gz {os.path.getsize(sqlite_path + '.gz') / 1e6:.2f} MB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=ALL)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="bad,good")
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--no-nsys", action="store_true")
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--modes", default="timing,torchprof,nsys",
                    help="comma list of timing, torchprof, nsys (e.g. 'nsys' for a repeat capture)")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="seconds after start past which no further scenario is started (0: none)")
    args = ap.parse_args()
    modes = set(args.modes.split(","))
    if args.no_nsys:
        modes.discard("nsys")
    t_start = time.time()
    py = sys.executable
    exports = []
    summary = {}
    for sc in args.scenarios:
        if args.deadline and time.time() - t_start > args.deadline:
            print(f"== {sc}: SKIPPED (deadline {args.deadline:.0f} s passed)", flush=True)
            continue
        for v in args.variants.split(","):
            d = os.path.join(args.out, sc, v)
            os.makedirs(d, exist_ok=True)
            print(f"== {sc}/{v}", flush=True)
            common = ["--scenario", sc, "--variant", v, "--out", d, "--warmup", str(args.warmup)]
            if "timing" in modes:
                sh([py, HARNESS, "timing", *common, "--steps", str(args.steps)],
                   os.path.join(d, "timing.log"), args.timeout)
            if "torchprof" in modes:
                rc = sh([py, HARNESS, "torchprof", *common], os.path.join(d, "torchprof.log"), args.timeout)
                if rc == 0 and os.path.exists(os.path.join(d, "trace.json")):
                    gzip_file(os.path.join(d, "trace.json"), os.path.join(d, "trace.json.gz"))
            if "nsys" in modes:
                rep = os.path.join(d, "nsys")
                rc = sh(["nsys", "profile", *NSYS_FLAGS, "-o", rep, py, HARNESS, "nsys", *common],
                        os.path.join(d, "nsys.log"), args.timeout)
                if os.path.exists(rep + ".nsys-rep"):
                    exports.append((rep + ".nsys-rep", os.path.join(d, "nsys.sqlite")))
            tj = os.path.join(d, "timing.json")
            if os.path.exists(tj):
                with open(tj) as f:
                    summary.setdefault(sc, {})[v] = json.load(f)["step_ms_cuda_events"]
    if exports:
        print(f"== exporting {len(exports)} nsys reports", flush=True)
        with cf.ThreadPoolExecutor(max_workers=8) as ex:
            for rep, msg in ex.map(lambda a: export_job(*a), exports):
                print(f"  {os.path.relpath(rep, args.out)}: {msg}", flush=True)
    with open(os.path.join(args.out, f"summary_{int(time.time())}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\n{'scenario':24s} {'bad ms':>9s} {'sd':>7s} {'good ms':>9s} {'sd':>7s} {'speedup':>8s}")
    for sc, vv in summary.items():
        b, g = vv.get("bad"), vv.get("good")
        if b and g:
            print(f"{sc:24s} {b['mean']:9.3f} {b['stdev']:7.3f} {g['mean']:9.3f} {g['stdev']:7.3f} "
                  f"{b['mean'] / g['mean']:8.2f}x")
        else:
            print(f"{sc:24s} incomplete: {list(vv)}")


if __name__ == "__main__":
    main()
