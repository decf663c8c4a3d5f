#!/bin/bash
# Wave 5, last call: (a) timm train.py ResNet-50 FP32 (wave4_timm_try.sh's job) under `advisor
# profile`, its trace kept this time, to replay the reworked fp32-matmul model on it (measured in
# wave 4: --try bf16 1.12x, timm's own --amp --amp-dtype bfloat16 1.09x from its log);
# (b) the hooks' cost on nanoGPT char again, plain against hooks alone, both pinned to the same
# six cores (taskset) to take the scheduler's migrations out of the round-to-round noise.
# From the repository root with .carry/ (dist/, timm/, nanogpt/), .whl/.
set -u
R=$PWD; W=/tmp/w19; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-420}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1
mkdir -p $W/t && cp .carry/timm/train.py $W/t/ && cd $W/t
T="train.py --data-dir $W/imnet --model resnet50 -b 128 --img-size 160 -j 12 --epochs 2 --log-interval 1 --warmup-epochs 0 --checkpoint-hist 1 --output $W/out"
run timm_profile 150 advisor profile --then stop --out $W/rep/timm --json $W/rep/timm.json $T
grep -A3 'fp32-matmul' $W/logs/timm_profile.log | head -8
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
run overhead_pinned 220 taskset -c 2-7 python3 "$R/benchmarks/real_script_ab.py" --warmup 1 --pairs 4 --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=600 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False
tail -16 $W/logs/overhead_pinned.log
tar -czf $W/all.tgz -C $W logs rep; split -b 15m $W/all.tgz $OUT/all.tgz.part-; echo "[total] $(( $(date +%s) - T0 ))s"
