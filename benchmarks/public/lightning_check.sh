#!/bin/bash
# Issue #12/#13: Lightning imagenet.py (torchvision ViT-B/16, batch 64) re-measured as the HF
# step was: advisor profile --nsys of 32-true and bf16-mixed, the steps timed by advisor's host
# clock outside the recorded window in the same process conditions, and each step's GPU time.
HARD=${HARD:-400}
source "$(dirname "$0")/device_common.sh"
lightning_job
AP="advisor profile -q --wait 10 --steps 8 --then continue"
LA="$LA --trainer.max_steps 60"
cd $C/lightning
profiled lightning_bf16_nsys 140 --nsys $LA --trainer.precision bf16-mixed
profiled lightning_fp32_nsys 160 --nsys $LA --trainer.precision 32-true
ship_traces; tar -cf $OUT/traces.tar -C $W/traces .
ship_logs
