#!/bin/bash
# Issue 36: `advisor profile --try bf16` on timm's train.py (huggingface/pytorch-image-models
# @ aa4b585, carried as .carry/timm/train.py, unmodified, with the device image's timm),
# ResNet-50, 160 px, batch 128, 12 workers, FP32 (its default) on synthesized JPEGs; by hand the
# script's own knob (--amp --amp-dtype bfloat16) against FP32, each timed from its own log.
# From the repository root with .carry/ (dist/ the wheel, timm/), .whl/.
set -u
R=$PWD; W=/tmp/w13; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 -c "import timm; print('timm', timm.__version__)"
python3 benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1
mkdir -p $W/t && cp .carry/timm/train.py $W/t/ && cd $W/t
T="train.py --data-dir $W/imnet --model resnet50 -b 128 --img-size 160 -j 12 --epochs 2 --log-interval 1 --warmup-epochs 0 --checkpoint-hist 1 --output $W/out"
run fp32 120 python3 $T
run bf16 120 python3 $T --amp --amp-dtype bfloat16
run try 330 advisor profile --try bf16 --try-runs 1 --try-steps 20 --try-time 15 --out $W/rep/try --json $W/rep/try.json $T --epochs 6
rm -rf $W/rep/try/try/scratch; find $W/rep -name '*.json.gz' -size +8M -delete
tar -czf $W/all.tgz -C $W logs rep; split -b 15m $W/all.tgz $OUT/all.tgz.part-; echo "[total] $(( $(date +%s) - T0 ))s"
