#!/bin/bash
# Issue #12/#13: HF run_clm.py bf16 with and without the Trainer's own compile knob
# (--torch_compile True), each under advisor profile (torch.profiler window), the steps timed
# by advisor's host clock outside the window.
HARD=${HARD:-330}
source "$(dirname "$0")/device_common.sh"
hf_job
AP="advisor profile -q --wait 20 --steps 6 --then continue"
HF="$HF --max_steps 70 --bf16"
cd $W
profiled hf_bf16_compile 200 $HF --torch_compile True
profiled hf_bf16 90 $HF
(cd $W/traces && tar -cf $OUT/traces.tar --exclude='*.json.gz' .)
ship_logs
