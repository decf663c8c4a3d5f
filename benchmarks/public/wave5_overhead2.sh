#!/bin/bash
# Wave 5, issue 32, second call: the hooks alone against plain on nanoGPT char (launch-bound),
# more rounds after a warm-up run that is not counted (the first call's plain runs went from
# 15.8 to 10.8 ms as the machine warmed: round-to-round noise of up to 25%), 1,000 iterations
# a run. From the repository root with .carry/, .whl/.
set -u
R=$PWD; W=/tmp/w18; mkdir -p $W/logs; T0=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
timeout ${HARD:-560} python3 "$R/benchmarks/real_script_ab.py" --warmup 1 --pairs ${PAIRS:-7} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=1000 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab2.log
# HF run_clm.py --bf16 (wave5_hf_steps.sh): its steps 31-110 ran at 55-62 ms, 111-300 at 76 ms;
# the GPU's clocks, power and temperature sampled every 200 ms beside a 300-step run whose log
# lines (every 10 steps) are stamped with the host clock
export HF_HOME=$W/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd $R && python3 -m pip install -q --no-index --no-deps .whl/datasets-*.whl .whl/evaluate-*.whl .whl/dill-*.whl .whl/multiprocess-*.whl >> $W/logs/pip.log 2>&1
python3 benchmarks/public/synth_data.py text $W/txt > $W/logs/synth.log 2>&1
mkdir -p $W/h && cp .carry/hf/run_clm.py $W/h/ && cd $W/h
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 200 > $W/logs/smi.csv &
SMI=$!
timeout 120 python3 run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8 --max_steps 300 --bf16 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done > $W/logs/hf_bf16_300_stamped.log
kill $SMI; grep -c . $W/logs/smi.csv
cp $W/logs/* $OUT/ 2>/dev/null; echo "[total] $(( $(date +%s) - T0 ))s"
