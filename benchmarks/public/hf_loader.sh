#!/bin/bash
# Issue #13: `loader-jitter` on the compiled HF step says "Set TrainingArguments(
# dataloader_num_workers=15)" (the Trainer's default loads on the training thread; 16 cores
# recorded). HF run_clm.py GPT-2 bf16 + --torch_compile True, as is and with the Trainer's own
# --dataloader_num_workers 15, each under advisor profile (torch.profiler window, steps timed by
# advisor's host clock outside it), in one device call.
HARD=${HARD:-400}
source "$(dirname "$0")/device_common.sh"
python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
AP="advisor profile -q --wait 20 --steps 6 --then continue"
HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8 --max_steps 70 --bf16 --torch_compile True"
cd $W
run hf_compile 170 $AP --out $W/traces/hf_compile --json $W/traces/hf_compile.json $HF
run hf_compile_w15 170 $AP --out $W/traces/hf_compile_w15 --json $W/traces/hf_compile_w15.json $HF --dataloader_num_workers 15
(cd $W && tar -cf $OUT/res.tar --exclude='*.json.gz' traces)
tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT
