#!/bin/bash
# Issue #14 (fourth pass): the torch.profiler-with-stacks costs fitted on other workloads
# (advisor/engine/profiler_cost.py), checked on a public script they never saw: HF run_clm.py
# GPT-2 bf16, eager and with the Trainer's own compile knob, each under advisor profile (its
# default: shapes and stacks), the trace kept and the steps outside the window timed.
HARD=${HARD:-380}
source "$(dirname "$0")/device_common.sh"
hf_job
AP="advisor profile -q --wait 20 --steps 4 --then continue"
HF="$HF --max_steps 70 --bf16"
cd $W
profiled hf_bf16_stack 110 $HF
profiled hf_bf16_compile_stack 200 $HF --torch_compile True
(cd $W/traces && tar -cf /tmp/tr.tar .) && split -b 15m -d /tmp/tr.tar "$OUT/traces.tar."
ship_logs
