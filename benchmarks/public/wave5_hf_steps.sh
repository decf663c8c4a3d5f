#!/bin/bash
# Wave 5, issue 36, second HF call: why `--try bf16` on run_clm.py measured 74.3 ms per bf16
# step where the Trainer's own log gave 62.5 ms (train_runtime of 110 against 30 steps):
# --bf16 runs of 30, 110 and 300 steps (does the step keep getting faster after step 30?),
# the same under advisor's hooks alone (what they cost this step), and the trial again with
# 150 timed steps (each trial's every step is in its result, `steps_ms`). Same set-up as
# wave5_hf_try.sh.
set -u
R=$PWD; W=/tmp/w17; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1 HF_HOME=$W/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
python3 -m pip install -q --no-index --no-deps .whl/datasets-*.whl .whl/evaluate-*.whl .whl/dill-*.whl .whl/multiprocess-*.whl >> $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s) $(grep -o "'train_runtime': '[0-9.]*'" $W/logs/$name.log | tail -1)"; }
python3 benchmarks/public/synth_data.py text $W/txt > $W/logs/synth.log 2>&1 || tail -5 $W/logs/synth.log
mkdir -p $W/h && cp .carry/hf/run_clm.py $W/h/ && cd $W/h
HF="run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8"
AH="advisor profile -q --wait 1000000 --then continue --out $W/rep/hooks"
run bf16_30 90 python3 $HF --max_steps 30 --bf16
run bf16_110 90 python3 $HF --max_steps 110 --bf16
run bf16_300 120 python3 $HF --max_steps 300 --bf16
run hooks_bf16_30 90 $AH $HF --max_steps 30 --bf16
run hooks_bf16_110 90 $AH $HF --max_steps 110 --bf16
run try 300 advisor profile --try bf16 --try-runs 2 --try-steps 150 --try-time 30 --out $W/rep/try --json $W/rep/try.json $HF --max_steps 2000
tail -8 $W/logs/try.log
rm -rf $W/rep/try/try/scratch $W/hfo $W/rep/hooks; find $W/rep -name '*.json.gz' -delete
tar -czf $W/all.tgz -C $W logs rep; split -b 15m $W/all.tgz $OUT/all.tgz.part-; echo "[total] $(( $(date +%s) - T0 ))s"
