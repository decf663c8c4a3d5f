#!/bin/bash
# Issue #12: is the FP32 HF Trainer step's host work (traced while the GPU is the bottleneck)
# slower than the same host work in the host-bound bf16 step? advisor profile (--nsys and
# torch.profiler) of run_clm.py bf16 and FP32: traces plus the unprofiled steps measured outside
# the window in the same process.
HARD=${HARD:-420}
source "$(dirname "$0")/device_common.sh"
python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
echo "[synth] $(( $(date +%s) - T0 ))s"
AP="advisor profile -q --wait 6 --steps 8 --then continue"
HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8 --max_steps 48"
cd $W
run hf_bf16_nsys 130 $AP --nsys --out $W/traces/hf_bf16_nsys --json $W/traces/hf_bf16_nsys.json $HF --bf16
run hf_bf16_prof 120 $AP --out $W/traces/hf_bf16 --json $W/traces/hf_bf16.json $HF --bf16
run hf_fp32_nsys 130 $AP --nsys --out $W/traces/hf_fp32_nsys --json $W/traces/hf_fp32_nsys.json $HF
(cd $W/traces && find . -name '*.sqlite' -exec gzip -f {} \; ; find . -name '*.nsys-rep' -delete
 tar -cf $OUT/traces.tar .)
tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT
