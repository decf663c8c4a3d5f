#!/bin/bash
# Wave 4: the loader model's proposal on the loader-bound public script (issues 34, 36), one
# device call from the repository root with .carry/ (dist/ the built wheel; imagenet/main.py from
# pytorch/examples @ 77f55b9), .whl/: ResNet-18, batch 256, 2 epochs of 61 iterations on
# synthesized JPEGs (each image three times). By hand from the script's own log: -j 4 and -j 10
# (the worker count the model proposes on a 16-core host); then `advisor profile --try` of -j 4
# (one round: the wave-3 call with two rounds ran past its 330 s).
set -u
R=$PWD; W=/tmp/w11; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
nproc
python3 benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1
for d in $W/imnet/train/*; do for f in $d/*.jpg; do b=${f%.jpg}; ln -s $f ${b}_b.jpg; ln -s $f ${b}_c.jpg; done; done
mkdir -p $W/run && cp .carry/imagenet/main.py $W/run/ && cd $W/run
M="main.py -a resnet18 -b 256 --epochs 2 -p 1 $W/imnet"
run plain_j4 100 python3 $M -j 4
run plain_j10 100 python3 $M -j 10
run try_j4 400 advisor profile --try --try-runs 1 --try-steps 25 --try-time 20 --out $W/rep/try --json $W/rep/try.json $M -j 4
rm -rf $W/rep/try/try/scratch; find $W/rep -name '*.json.gz' -size +8M -delete
tar -czf $W/all.tgz -C $W logs rep; split -b 15m $W/all.tgz $OUT/all.tgz.part-; echo "[total] $(( $(date +%s) - T0 ))s"
