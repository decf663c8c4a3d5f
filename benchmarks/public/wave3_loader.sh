#!/bin/bash
# Wave 3, the loader-bound public script on the H100 (issues 32, 34, 36), from the repository root
# with .carry/ (dist/ the built wheel; imagenet/main.py from pytorch/examples @ 77f55b9, never
# committed), .whl/ (advisor's dependencies the image lacks) and .device-kit:
# ResNet-18, batch 256, 4 DataLoader workers (bursty: the workers deliver in bursts) on an
# ImageFolder of synthesized JPEGs, each image three times (61 iterations an epoch, 2 epochs):
#   plain_j4, plain_j15   the script timed from its own log ("Time" per iteration)
#   prof_j4               under `advisor profile`: its reported step against the log of the same run
#   try_j4                `advisor profile --try loader-jitter`: the worker fix measured by advisor
set -u
R=$PWD; W=/tmp/w5; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-570}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 benchmarks/public/synth_data.py images $W/imnet
for d in $W/imnet/train/*; do for f in $d/*.jpg; do b=${f%.jpg}; ln -s $f ${b}_b.jpg; ln -s $f ${b}_c.jpg; done; done
echo "[data] $(( $(date +%s) - T0 ))s"
mkdir -p $W/run && cp .carry/imagenet/main.py $W/run/ && cd $W/run
M="main.py -a resnet18 -b 256 --epochs 2 -p 1 $W/imnet"
run plain_j4 120 python3 $M -j 4
run prof_j4 150 advisor profile --out $W/rep/j4 --json $W/rep/j4.json $M -j 4
run plain_j15 120 python3 $M -j 15
run try_j4 300 advisor profile --try loader-jitter --try-runs 2 --out $W/rep/try --json $W/rep/try.json $M -j 4
rm -rf $W/rep/try/try/scratch; tar -czf $OUT/loader.tgz -C $W logs rep; ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
