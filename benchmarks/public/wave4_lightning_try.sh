#!/bin/bash
# Issue 36 on the H100: `advisor profile --try bf16` on Lightning's public ImageNet example
# (Lightning-AI/pytorch-lightning @ 7f0c343 examples/pytorch/domain_templates/imagenet.py, carried
# as .carry/lightning/imagenet.py, unmodified), torchvision ViT-B/16, batch 64, FP32 (32-true, its
# default) on synthesised JPEGs: advisor turns Lightning's own knob (Trainer(precision=
# "bf16-mixed")) on in the trials. The by-hand pair of the same script (32-true against
# --trainer.precision bf16-mixed, timed outside advisor's window) is fixtures/public/measured.json
# "lightning-vit-b". From the repository root with .carry/ (dist/ the wheel, lightning/), .whl/
# (advisor's dependencies and LightningCLI's: jsonargparse, docstring-parser, typeshed-client,
# importlib-resources).
set -u
R=$PWD; W=/tmp/w8; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-580}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" jsonargparse docstring-parser typeshed-client importlib-resources > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 30 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 $R/benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1; echo "[synth] $(( $(date +%s) - T0 ))s"
mkdir -p $W/l && cp $R/.carry/lightning/imagenet.py $W/l/ && cd $W/l
LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0 --trainer.max_steps 3000"
run try 540 advisor profile --try bf16 --try-runs 2 --try-steps 25 --try-time 15 --out $W/rep/try --json $W/rep/try.json --html $W/rep/try.html $LA
rm -rf $W/rep/try/try/scratch; find $W/rep -name '*.nsys-rep' -delete
tar -czf $W/all.tgz -C $W logs rep 2>/dev/null; split -b 15m $W/all.tgz $OUT/all.tgz.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
