#!/bin/bash
# Wave 5, issue 36: `advisor profile --try` on Hugging Face's run_clm.py
# (huggingface/transformers @ 00d481d, examples/pytorch/language-modeling/run_clm.py, carried as
# .carry/hf/run_clm.py, unmodified), GPT-2 124M from scratch, batch 8 x 1024, FP32 (its default),
# on text and a tokenizer made by synth_data.py; by hand the Trainer's own --bf16 against FP32,
# each timed from the Trainer's own log: train_runtime of --max_steps 30 and 110 runs, the
# settled step = the difference over the 80 extra steps. From the repository root with .carry/
# (dist/ the wheel, hf/), .whl/ (advisor's wheels and datasets, evaluate, dill, multiprocess).
set -u
R=$PWD; W=/tmp/w16; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1 HF_HOME=$W/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
python3 -m pip install -q --no-index --no-deps .whl/datasets-*.whl .whl/evaluate-*.whl .whl/dill-*.whl .whl/multiprocess-*.whl >> $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 -c "import transformers, datasets; print('transformers', transformers.__version__, 'datasets', datasets.__version__)"
python3 benchmarks/public/synth_data.py text $W/txt > $W/logs/synth.log 2>&1 || tail -5 $W/logs/synth.log
mkdir -p $W/h && cp .carry/hf/run_clm.py $W/h/ && cd $W/h
HF="run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8"
run fp32_30 150 python3 $HF --max_steps 30
run fp32_110 150 python3 $HF --max_steps 110
run bf16_30 150 python3 $HF --max_steps 30 --bf16
run bf16_110 150 python3 $HF --max_steps 110 --bf16
for f in $W/logs/fp32_*.log $W/logs/bf16_*.log; do echo "$(basename $f): $(grep -o "'train_runtime': [0-9.]*" $f | tail -1)"; done
run try 330 advisor profile --try bf16 --try-runs 2 --try-steps 40 --try-time 15 --out $W/rep/try --json $W/rep/try.json --html $W/rep/try.html $HF --max_steps 2000
tail -30 $W/logs/try.log
rm -rf $W/rep/try/try/scratch $W/hfo; find $W/rep -name '*.json.gz' -size +12M -delete
tar -czf $W/all.tgz -C $W logs rep; split -b 15m $W/all.tgz $OUT/all.tgz.part-; echo "[total] $(( $(date +%s) - T0 ))s"
