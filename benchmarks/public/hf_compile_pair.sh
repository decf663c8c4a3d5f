#!/bin/bash
# Issues #12/#13: a fix measured on the compiled HF step. HF run_clm.py GPT-2 bf16 with the
# Trainer's --torch_compile True as is (its torch.profiler trace kept) and with the fix's flags
# (NAME FLAGS...: the Trainer's own knobs), each under advisor profile (torch.profiler window,
# the steps timed by advisor's host clock outside it), in one device call. hf_graphs.sh and
# hf_loader.sh are the two fixes measured so far.
NAME=$1; shift
HARD=${HARD:-400}
source "$(dirname "$0")/device_common.sh"
hf_job
AP="advisor profile -q --wait 20 --steps 6 --then continue"
HF="$HF --max_steps 70 --bf16 --torch_compile True"
cd $W
profiled hf_compile 170 $HF
profiled "hf_compile_$NAME" 170 $HF "$@"
(cd $W && tar -cf $OUT/res.tar --exclude="hf_compile_$NAME/*.json.gz" traces)
ship_logs
