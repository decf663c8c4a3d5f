#!/bin/bash
# Issue #12/#13: HF run_clm.py bf16 with and without the Trainer's own compile knob
# (--torch_compile True), each under advisor profile (torch.profiler window), the steps timed
# by advisor's host clock outside the window.
HARD=${HARD:-330}
source "$(dirname "$0")/device_common.sh"
python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
echo "[synth] $(( $(date +%s) - T0 ))s"
AP="advisor profile -q --wait 20 --steps 6 --then continue"
HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8 --max_steps 70 --bf16"
cd $W
run hf_bf16_compile 200 $AP --out $W/traces/hf_bf16_compile --json $W/traces/hf_bf16_compile.json $HF --torch_compile True
run hf_bf16 90 $AP --out $W/traces/hf_bf16 --json $W/traces/hf_bf16.json $HF
(cd $W/traces && tar -cf $OUT/traces.tar --exclude='*.json.gz' .)
tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT
