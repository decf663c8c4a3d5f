#!/bin/bash
# The H100 validation runs of issue #12, in one device call per part (see README.md here).
#   bash device_run.sh A   planted compiler-fusion/FP8 scenario + Lightning ImageNet example (ViT-B/16)
#   bash device_run.sh B   nanoGPT train.py, the Lightning example in bf16-mixed and profiled, timm benchmark.py (ViT-B/16)
# Expects (carried in $C): adv/ (this repo), whl/ (torchao, jsonargparse and friends),
# nanogpt/, timm/, lightning/ (the public scripts, unmodified, never committed).
set -u
PART=$1; C=${C:-$PWD/.carry-fusion}; W=/tmp/w; L=$W/logs; mkdir -p $L $W/traces
DEADLINE=${DEADLINE:-545}; T0=$(date +%s)
ok() { [ $(( $(date +%s) - T0 )) -lt $DEADLINE ] || { echo "SKIP (deadline): $*"; return 1; }; }
run() { local name=$1 to=$2; shift 2; ok "$name" || return 0; local t=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $C/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e $C/adv > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }
source .device-kit/nsys-env.sh
nvidia-smi --query-gpu=name,compute_cap,clocks.max.sm,memory.total --format=csv > $L/gpu.log
python3 -c "import torch, torchao; print(torch.__version__, torchao.__version__)" >> $L/gpu.log 2>&1
cat $L/gpu.log
AP="advisor profile --wait 5 --steps 8"
if [ "$PART" = A ]; then
  S=$C/adv/benchmarks/scenarios/capture.py
  ok planted && python3 $S compiler-fusion --out $W/planted --variants gpt2-eager,wide-eager \
      --warmup 10 --steps 30 --timeout 150 > $L/planted_eager.log 2>&1; echo "[planted eager] $(( $(date +%s) - T0 ))s"
  ok planted && python3 $S compiler-fusion --out $W/planted --modes timing --warmup 10 --steps 30 --timeout 150 \
      --variants gpt2-compile,wide-compile,wide-fp8-compile,wide-fp8,gpt2-fp8,gpt2-fp8-compile \
      > $L/planted_routes.log 2>&1; echo "[planted routes] $(( $(date +%s) - T0 ))s"
  ok planted && python3 $S compiler-fusion --out $W/planted --modes torchprof --warmup 10 --timeout 120 \
      --variants gpt2-compile,wide-fp8-compile > $L/planted_compiled_traces.log 2>&1
  python3 $C/adv/benchmarks/public/synth_data.py images $W/imnet
  LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0"
  cd $C/lightning
  for P in 32-true bf16-mixed; do for N in 20 70; do
    run lightning_${P}_n$N 120 python3 $LA --trainer.max_steps $N --trainer.precision $P; done; done
  run lightning_prof 150 $AP --out $W/traces/lightning_fp32 $LA --trainer.max_steps 30
  run lightning_nsys 180 $AP --nsys --out $W/traces/lightning_fp32_nsys $LA --trainer.max_steps 30
  cd - > /dev/null
  (cd $W/planted && find . -name '*.json' -o -name '*.gz' | tar -cf $OUT/planted.tar -T -)
else
  mkdir -p $W/ng && cp $C/nanogpt/*.py $W/ng/ && python3 $C/adv/benchmarks/public/synth_data.py tokens $W/ng/data/synth
  python3 $C/adv/benchmarks/public/synth_data.py images $W/imnet &
  cd $W/ng
  NG="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=2 --log_interval=1 --out_dir=$W/ng_out --always_save_checkpoint=False"
  run nanogpt_eager 100 python3 $NG --max_iters=30 --compile=False
  run nanogpt_compile 200 python3 $NG --max_iters=30 --compile=True
  run nanogpt_prof 120 $AP --out $W/traces/nanogpt_eager $NG --max_iters=20 --compile=False
  run nanogpt_nsys 150 $AP --nsys --out $W/traces/nanogpt_eager_nsys $NG --max_iters=20 --compile=False
  wait
  LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0"
  cd $C/lightning
  for N in 20 70; do run lightning_bf16-mixed_n$N 100 python3 $LA --trainer.max_steps $N --trainer.precision bf16-mixed; done
  run lightning_prof 120 $AP --out $W/traces/lightning_fp32 $LA --trainer.max_steps 20
  run lightning_nsys 150 $AP --nsys --out $W/traces/lightning_fp32_nsys $LA --trainer.max_steps 20
  cd $C/timm
  TB="benchmark.py --bench train --model vit_base_patch16_224 -b 128 --num-warm-iter 10 --num-bench-iter 30"
  run timm_bf16_eager 100 python3 $TB --precision amp_bfloat16
  run timm_bf16_compile 200 python3 $TB --precision amp_bfloat16 --torchcompile
  run timm_prof 120 $AP --out $W/traces/timm_bf16_eager $TB --precision amp_bfloat16
  run timm_nsys 150 $AP --nsys --out $W/traces/timm_bf16_eager_nsys $TB --precision amp_bfloat16
  cd - > /dev/null
fi
python3 $C/adv/benchmarks/public/parse_logs.py $L | tee $L/summary.json
(cd $W/traces && for f in $(find . -name '*.sqlite'); do gzip -f $f; done; find . -name '*.gz' -o -name '*.json' | tar -cf $OUT/traces_$PART.tar -T -)
tar -czf $OUT/logs_$PART.tgz -C $W logs $(cd $W && ls -d planted/*/*/*.log planted/*/*/*/*.log 2>/dev/null)
ls -la $OUT; grep -h "^\[timing\]\|^\[torchprof\]\|FAILED\|mean" $W/planted/*/*/*.log $L/planted*.log 2>/dev/null | head -40
