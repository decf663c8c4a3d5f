#!/bin/bash
# One device call of benchmarks/unprofiled_check.py's second pass (2026-11-23): the calibration
# workloads with in-process plain steps (part C, cal-*), nanoGPT plain / torch.profiler / nsys
# (part A) and the launch- and GPU-bound scenarios (part B). Run from the repository root on the
# device, carrying .device-kit (nsys) and a folder CARRY with ext/nanoGPT (karpathy/nanoGPT's
# train.py, model.py, configurator.py, config/train_shakespeare_char.py; never committed) and,
# optionally, the nvtx wheel. Results go to $OUT as res.tar.NN (15 MB pieces).
set -u
CARRY=${CARRY:-$PWD/.carry-cal}; T0=$(date +%s)
source .device-kit/nsys-env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1 || tail -5 /tmp/pip.log
python3 -c "import nvtx" 2>/dev/null || python3 -m pip install -q --no-deps "$CARRY"/nvtx-*.whl
python3 -c "import msgspec" 2>/dev/null || python3 -m pip install -q --no-deps "$CARRY"/msgspec-*.whl  # advisor's own dependency; not in the device image
W=/tmp/cal; mkdir -p $W
C="python3 benchmarks/unprofiled_check.py collect --out $W --ext $CARRY/ext --job-timeout 100"
$C --part C --names cal- --deadline 150
$C --part A --names nanogpt-plain,nanogpt-kineto,nanogpt-nsys --deadline $(( 470 - $(date +%s) + T0 - 110 ))
$C --part B --per-class 2 --names unfused-attention,uncaptured-cuda-graph --deadline $(( 470 - $(date +%s) + T0 ))
rm -rf $W/images $W/nanogpt-out $W/timm-out
cd $W && tar -cf /tmp/res.tar . && cd /tmp && split -b 15m -d res.tar "$OUT/res.tar."
