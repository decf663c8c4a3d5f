#!/bin/bash
# Second device call of issue #13: the worker runs of loader_run.sh again on an epoch long
# enough for the steady state. With -j N, DataLoader prefetches 2 x N batches while the first
# iteration waits for the workers to start; an epoch of 21 iterations (5,200 images) is served
# from that queue and times the queue, not the workers. Here the ImageFolder holds each
# synthesized JPEG three times (symlinks: same decode cost, 15,600 images, 61 iterations of
# 256) and parse_loader_logs.py reads the last quarter of the epoch (the queue has drained).
# -j 0 has no queue: its steady step is loader_run.sh's.
set -u
C=${C:-$PWD/.carry-frameworks}; W=/tmp/w; L=$W/logs; mkdir -p $L
T0=$(date +%s)
run() { local name=$1 to=$2; shift 2; local t=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
export PYTHONUNBUFFERED=1
python3 $C/adv/benchmarks/public/synth_data.py images $W/imnet
for d in $W/imnet/train/*; do for f in $d/*.jpg; do b=${f%.jpg}; ln -s $f ${b}_b.jpg; ln -s $f ${b}_c.jpg; done; done
echo "[data] $(ls $W/imnet/train/*/ | wc -l) entries $(( $(date +%s) - T0 ))s"
cd $C/imagenet
M="main.py -a resnet18 -b 256 --epochs 1 -p 1 $W/imnet"
run j15_long 120 python3 $M -j 15
run j7_long 120 python3 $M -j 7
cd - > /dev/null
python3 $C/adv/benchmarks/public/parse_loader_logs.py $L | tee $L/summary.json
tar -czf $OUT/logs_steady.tgz -C $W logs
echo "[total] $(( $(date +%s) - T0 ))s"
