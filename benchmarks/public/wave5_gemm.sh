#!/bin/bash
# Issue 38: the GEMM microbenchmark, measured soundly. benchmarks/gemm_efficiency.py times each
# GEMM with torch.utils.benchmark and records the same loop (as many calls) under torch.profiler
# right after, three rounds back to back after a warm-up, and reports per round the benchmark's
# per-call time, the profiled loop's (CUDA events), the median single kernel, advisor's
# TFLOP/s from the trace, the kernels' drift within the loop and the SM clock and power
# (nvidia-smi) around each half. The first version (wave 3) compared 0.5 s of benchmark with 10
# profiled calls and missed 4096^3 bf16 (+13.4%) and fp16 (-19.3%).
# From the repository root with .carry/dist (advisor's wheel) and .whl/ (its dependencies the
# image lacks), as wave4_timm_try.sh; installs nothing else. About 2.5 min; hard stop 290 s.
set -u
R=$PWD; W=/tmp/w5gemm; mkdir -p $W/logs $W/eff; T0=$(date +%s); HARD=${HARD:-290}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $W/logs/smi_start.csv 2>&1
rem=$(( HARD - 15 - $(date +%s) + T0 ))
# --budget: after it, each remaining case gets one round (the JSON says how many each had)
timeout $rem python3 benchmarks/gemm_efficiency.py --out $W/eff --rounds 3 --min-run-time 0.3 \
  --warmup 0.3 --budget $(( rem - 60 )) > $W/logs/gemm.log 2>&1
echo "[gemm] rc=$? $(( $(date +%s) - T0 ))s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > $W/logs/smi_end.csv 2>&1
grep -v '^USDT\|^STAGE:' $W/logs/gemm.log | tail -20
cp $W/logs/*.log $W/logs/*.csv $OUT/ 2>/dev/null; cp $W/eff/results.json $OUT/gemm_results.json 2>/dev/null
# the Kineto traces (a few MB each) in one archive, split below the transfer limit
tar -czf $W/traces.tgz -C $W eff && split -b 15m $W/traces.tgz $OUT/traces.tgz.part-
echo "[total] $(( $(date +%s) - T0 ))s"
