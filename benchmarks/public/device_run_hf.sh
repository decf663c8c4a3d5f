#!/bin/bash
# The HF Trainer validation run (issue #12) and the Lightning recapture, in one device call.
# Run from the repository root (advisor is installed from it); carried in $C (see README.md):
# whl/ (datasets, evaluate, dill, multiprocess; jsonargparse and friends for LightningCLI),
# hf/run_clm.py and lightning/imagenet.py (public scripts, unmodified, never committed),
# scripts/ (this folder's synth_data.py and parse_logs.py).
#   1. transformers examples/pytorch/language-modeling/run_clm.py, GPT-2 124M from scratch,
#      8 x 1024 tokens per step: default (FP32) vs --bf16, each run for 10 and 40 steps (the
#      per-step time is the difference of the two train_runtime figures over 30 steps, which
#      cancels start-up and warm-up), then `advisor profile` (torch.profiler) and `--nsys` of FP32.
#   2. Lightning imagenet.py (ViT-B/16) under `advisor profile --nsys`, bf16-mixed and 32-true:
#      the fixed step's own trace, and the unprofiled steps outside the window (steps.measured).
#   3. run_clm.py --tf32 True, if time is left.
set -u
C=${C:-$PWD/.carry-transformer}; W=/tmp/w; L=$W/logs; mkdir -p $L $W/traces
# HARD: seconds after which nothing runs (each run's timeout is cut to end by then, leaving
# PACK seconds to pack the results: what is not under $OUT when the call ends is lost).
HARD=${HARD:-260}; PACK=${PACK:-15}; T0=$(date +%s)
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - PACK - $(date +%s) + T0 ))
  [ $rem -ge 25 ] || { echo "SKIP (deadline): $name"; return 0; }; [ $to -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $L/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $C/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HOME=$W/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }
source .device-kit/nsys-env.sh
nvidia-smi --query-gpu=name,compute_cap,clocks.max.sm,memory.total --format=csv > $L/gpu.log
python3 -c "import torch, transformers, datasets, pyarrow, lightning; print(torch.__version__, transformers.__version__, datasets.__version__, pyarrow.__version__, lightning.__version__)" >> $L/gpu.log 2>&1
cat $L/gpu.log
python3 $C/scripts/synth_data.py images $W/imnet > $L/synth_images.log 2>&1 &
python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
wait; echo "[synth] $(( $(date +%s) - T0 ))s"
AP="advisor profile --wait 5 --steps 8"
HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8"
cd $W
for P in fp32 bf16; do K=""; [ $P = bf16 ] && K="--bf16"
  for N in 10 40; do run hf_${P}_n$N 90 python3 $HF --max_steps $N $K; done; done
run hf_nsys 120 $AP --nsys --out $W/traces/hf_fp32_nsys --json $W/traces/hf_fp32_nsys.json $HF --max_steps 16
run hf_prof 90 $AP --out $W/traces/hf_fp32 --json $W/traces/hf_fp32.json $HF --max_steps 16
LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0"
cd $C/lightning
run lightning_bf16_nsys 100 $AP --nsys --out $W/traces/lightning_bf16_nsys --json $W/traces/lightning_bf16_nsys.json $LA --trainer.max_steps 24 --trainer.precision bf16-mixed
run lightning_fp32_nsys 100 $AP --nsys --out $W/traces/lightning_fp32_nsys --json $W/traces/lightning_fp32_nsys.json $LA --trainer.max_steps 24 --trainer.precision 32-true
cd $W
for N in 10 40; do run hf_tf32_n$N 60 python3 $HF --max_steps $N --tf32 True; done
python3 $C/scripts/parse_logs.py $L | tee $L/summary.json
(cd $W/traces && for f in $(find . -name '*.sqlite'); do gzip -f $f; done
 find . -path '*hf*' \( -name '*.gz' -o -name '*.json' \) | tar -cf $OUT/traces_hf.tar -T -
 find . -path '*lightning*' \( -name '*.gz' -o -name '*.json' \) | tar -cf $OUT/traces_lightning.tar -T -)
tar -czf $OUT/logs.tgz -C $W logs
ls -la $OUT; grep -h "Step time\|measured\|^[0-9]\. \|All step" $L/*nsys.log $L/hf_prof.log 2>/dev/null | head -40
