#!/bin/bash
# The H100 run of issue #13 in one device call: a DataLoader-bound public pipeline run
# unmodified (pytorch/examples imagenet/main.py, ResNet-18, batch 256, on an ImageFolder of
# synthesized JPEGs), with its loader on the training thread (-j 0) and with the worker count
# the fix names (-j 15: the 16-core host less one; -j 7: the 8 cores assumed for a bare trace),
# timed from its own log ("Time" per iteration, no profiler); then the -j 0 run under
# `advisor profile` (torch.profiler) and `advisor profile --nsys`.
# Expects (carried in $C): adv/ (this repository), imagenet/main.py (pytorch/examples, never
# committed). Parse: python3 benchmarks/public/parse_loader_logs.py LOGDIR
set -u
C=${C:-$PWD/.carry-frameworks}; W=/tmp/w; L=$W/logs; mkdir -p $L $W/traces
DEADLINE=${DEADLINE:-420}; T0=$(date +%s)
ok() { [ $(( $(date +%s) - T0 )) -lt $DEADLINE ] || { echo "SKIP (deadline): $*"; return 1; }; }
run() { local name=$1 to=$2; shift 2; ok "$name" || return 0; local t=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e $C/adv > $L/pip.log 2>&1 || { tail $L/pip.log; exit 1; }
source .device-kit/nsys-env.sh
{ python3 -c "import os, torch; print('cores', len(os.sched_getaffinity(0)), os.cpu_count(), torch.__version__)"
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $L/host.log 2>&1
cat $L/host.log
python3 $C/adv/benchmarks/public/synth_data.py images $W/imnet; echo "[data] $(( $(date +%s) - T0 ))s"
cd $C/imagenet
M="main.py -a resnet18 -b 256 --epochs 1 -p 1 $W/imnet"
run j0 150 python3 $M -j 0
run j15 90 python3 $M -j 15
run j7 90 python3 $M -j 7
AP="advisor profile --wait 4 --steps 6"
run prof_j0 180 $AP --out $W/traces/j0 --json $W/traces/j0/analysis.json $M -j 0
run nsys_j0 200 $AP --nsys --out $W/traces/j0_nsys --json $W/traces/j0_nsys/analysis.json $M -j 0
cd - > /dev/null
python3 $C/adv/benchmarks/public/parse_loader_logs.py $L | tee $L/summary.json
(cd $W/traces && for f in $(find . -name '*.sqlite'); do gzip -f $f; done; \
 find . -name '*.gz' -o -name '*.json' | tar -cf $OUT/traces.tar -T -)
tar -czf $OUT/logs.tgz -C $W logs
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
