#!/bin/bash
# Issue #12: the nsys shape probe (`advisor profile --nsys` runs the step before its window under
# emit_nvtx(record_shapes=True), advisor.graph.gemm_shapes). HF run_clm.py GPT-2 FP32 and
# Lightning imagenet.py ViT-B/16 FP32 under --nsys (traces for the fp32-matmul estimate from
# nsys with GEMM sizes), and nanoGPT plain / --nsys (the probe must leave the window's steps and
# the measured unprofiled step as they were). Carry .carry-transformer, .device-kit and a folder
# CARRY with ext/nanoGPT (see benchmarks/unprofiled_device_run.sh).
HARD=${HARD:-540}
source "$(dirname "$0")/device_common.sh"
CARRY=${CARRY:-$PWD/.carry-s4}; R=$PWD
hf_job
AP="advisor profile -q --wait 6 --steps 8 --then continue"
HF="$HF --max_steps 40"
cd $W
profiled hf_fp32_nsys 130 --nsys $HF
cd $R
run nanogpt 170 python3 benchmarks/unprofiled_check.py collect --out $W/cal --ext $CARRY/ext --job-timeout 75 --part A --names nanogpt-plain,nanogpt-nsys --deadline 160
lightning_job
LA="$LA --trainer.max_steps 40 --trainer.precision 32-true"
cd $C/lightning
run lightning_fp32_nsys 150 advisor profile -q --wait 10 --steps 8 --then continue --nsys --out $W/traces/lightning_fp32_nsys --json $W/traces/lightning_fp32_nsys.json $LA
rm -rf $W/cal/nanogpt-out
ship_traces; cp -r $W/cal $W/traces/; tar -cf $OUT/traces.tar -C $W/traces .
ship_logs
