#!/bin/bash
# Issue #12: is the FP32 HF Trainer step's host work (traced while the GPU is the bottleneck)
# slower than the same host work in the host-bound bf16 step? advisor profile (--nsys and
# torch.profiler) of run_clm.py bf16 and FP32: traces plus the unprofiled steps measured outside
# the window in the same process.
HARD=${HARD:-420}
source "$(dirname "$0")/device_common.sh"
hf_job
AP="advisor profile -q --wait 6 --steps 8 --then continue"
HF="$HF --max_steps 48"
cd $W
profiled hf_bf16_nsys 130 --nsys $HF --bf16
run hf_bf16_prof 120 $AP --out $W/traces/hf_bf16 --json $W/traces/hf_bf16.json $HF --bf16
profiled hf_fp32_nsys 130 --nsys $HF
ship_traces; tar -cf $OUT/traces.tar -C $W/traces .
ship_logs
