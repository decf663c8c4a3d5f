#!/bin/bash
# Issue #19 on the H100, one device call: Python-stack captures (`advisor profile`, torch.profiler
# with_stack in the window) of planted scenarios and two public scripts run unmodified, plus the
# calibration workloads timed plainly and traced with stacks (the stack-recording overhead).
# Expects in $C: adv/ (this repo), nanogpt/ (karpathy/nanoGPT@3adf61e train.py, model.py,
# configurator.py), timm/ (huggingface/pytorch-image-models@aa4b585 train.py + timm/): fetched
# code, carried, never committed.  Writes $OUT/source_lines.tgz.
set -u
C=${C:-$PWD/.carry-source}; W=/tmp/w; L=$W/logs; T=$W/traces; mkdir -p $L $T
DEADLINE=${DEADLINE:-150}; T0=$(date +%s)
ok() { [ $(( $(date +%s) - T0 )) -lt $DEADLINE ] || { echo "SKIP (deadline): $*"; return 1; }; }
run() { local name=$1 to=$2; shift 2; ok "$name" || return 0; local t=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e $C/adv > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader > $L/gpu.log
python3 -c "import torch, sys; print(torch.__version__, sys.version.split()[0])" >> $L/gpu.log; cat $L/gpu.log
(mkdir -p $W/ng && cp $C/nanogpt/*.py $W/ng/ && python3 $C/adv/benchmarks/public/synth_data.py tokens $W/ng/data/synth) &
(cd $C/adv/benchmarks && python3 -c "import sys; from pathlib import Path; sys.argv=['x']; import unprofiled_check as u; u.make_images(Path('$W/images'), False)") &
CAL=$C/adv/benchmarks/profiler_calibration.py
run cal-plain 40 python3 $CAL --mode plain --out $W/cal-plain
run cal-kineto-stack 40 python3 $CAL --mode kineto-stack --out $W/cal-kineto-stack
AP="advisor profile -q --wait 8 --steps 5"
S=$C/adv/benchmarks/scenarios
for sc in host-sync cpu-bound-loss loader-jitter; do
  run sc-$sc 40 $AP --out $T/$sc $S/$sc/scenario.py --variant bad --steps 24
done
wait
cd $W/ng
NG="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --compile=False --eval_interval=100000 --eval_iters=2 --log_interval=1 --max_iters=22 --out_dir=$W/ng_out --always_save_checkpoint=False"
run nanogpt 60 $AP --out $T/nanogpt $NG
cd $C/timm
TA="train.py --data-dir $W/images --model resnet18 -b 64 --epochs 2 -j 2 --log-interval 1 --checkpoint-hist 1 --warmup-epochs 0 --output $W/timm-out"
run timm 60 $AP --out $T/timm $TA
cd $W/ng
run nanogpt-nostack 60 $AP --no-stacks --out $T/nanogpt-nostack $NG
cd $W
for d in $T/*; do cp $d/analysis_rank0.json $d/capture_rank0.json $d/ 2>/dev/null; done
tar -czf $OUT/source_lines.tgz -C $W traces cal-plain cal-kineto-stack logs
ls -la $OUT; du -sh $T/*; grep -h "iter 1[0-9]:" $L/nanogpt*.log | head -4; tail -3 $L/timm.log
