#!/bin/bash
# Issues #14 and #12/#13, one device call: (1) the loader-bound timm rows of the unprofiled-step
# table (benchmarks/unprofiled_check.py part B: timm train.py resnet18, 2 workers, plain /
# torch.profiler / nsys, and the 500-iteration epoch plain / torch.profiler), re-taken after the
# CUPTI teardown fix; (2) HF run_clm.py bf16 + --torch_compile True with the Trainer's
# --torch_compile_mode reduce-overhead (CUDA graphs), the fix `uncaptured-cuda-graph` names on the
# compiled step, timed by advisor's host clock outside its window as hf_compile.sh timed the
# compiled step. Carry .carry-transformer, .device-kit and .carry-s4 (ext/timm/train.py,
# ext/nanoGPT; fetched, never committed).
HARD=${HARD:-560}
source "$(dirname "$0")/device_common.sh"
CARRY=${CARRY:-$PWD/.carry-s4}; R=$PWD
run timm 330 python3 benchmarks/unprofiled_check.py collect --out $W/cal --ext $CARRY/ext --job-timeout 110 --part B --names timm-plain,timm-kineto,timm-nsys,timm-long --deadline 300
rm -rf $W/cal/images $W/cal/timm-out
hf_job
AP="advisor profile -q --wait 20 --steps 6 --then continue"
HF="$HF --max_steps 70 --bf16 --torch_compile True"
cd $W
run hf_bf16_compile_ro 200 $AP --out $W/traces/hf_ro --json $W/traces/hf_ro.json $HF --torch_compile_mode reduce-overhead
(cd $W && tar -cf $OUT/res.tar --exclude='*.json.gz' cal traces)
ship_logs
