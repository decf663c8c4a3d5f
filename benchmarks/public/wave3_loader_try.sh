#!/bin/bash
# Wave 3: `advisor profile --try` on the loader-bound public script (issue 36), one device call
# from the repository root with .carry/ (dist/ the built wheel; imagenet/main.py from
# pytorch/examples @ 77f55b9), .whl/ and .device-kit: ResNet-18, batch 256, 4 workers, 2 epochs
# of 61 iterations on synthesized JPEGs (each image three times); the worker fix advisor tries
# beside the same script run by hand with the worker count it proposes (-j 15 on 16 cores).
set -u
R=$PWD; W=/tmp/w6; mkdir -p $W/logs $W/rep; T0=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
python3 benchmarks/public/synth_data.py images $W/imnet
for d in $W/imnet/train/*; do for f in $d/*.jpg; do b=${f%.jpg}; ln -s $f ${b}_b.jpg; ln -s $f ${b}_c.jpg; done; done
mkdir -p $W/run && cp .carry/imagenet/main.py $W/run/ && cd $W/run
M="main.py -a resnet18 -b 256 --epochs 2 -p 1 $W/imnet"
run plain_j4 120 python3 $M -j 4
run plain_j15 120 python3 $M -j 15
run try_j4 330 advisor profile --try --try-runs 2 --out $W/rep/try --json $W/rep/try.json $M -j 4
rm -rf $W/rep/try/try/scratch; tar -czf $OUT/loader_try.tgz -C $W logs rep; echo "[total] $(( $(date +%s) - T0 ))s"
