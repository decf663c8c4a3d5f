#!/bin/bash
# Wave 5 (issue 34 items 1-2): more DataLoader workers that make a public script slower, and the
# persistent-workers estimate, on the H100. One device call (< 500 s) from the repository root
# with .carry/ (dist/ the built wheel; imagenet/main.py from pytorch/examples @ 77f55b9) and
# .whl/, as wave4_loader_try.sh.
#
# pytorch/examples ImageNet main.py, unmodified: ResNet-50 (ARCH), batch 256, 4 epochs (EPOCHS)
# of 21 iterations on synthesised JPEGs (5200 train, 64 val images), workers restarted at every
# epoch and evaluation (main.py has no persistent_workers flag). A worker made a batch of 256 in
# ~0.45-0.56 s on this host (ResNet-18 runs, docs/validation.md), so 4 workers supply one every
# ~0.14 s; the ResNet-50 step is expected to take longer than that, so more workers add only
# their forks and start-up at every epoch and evaluation start, on cores the training thread
# shares. (Unmeasured on this host before this call: the table says whether -j 4 waited.)
#
# 1. By hand, no profiler: -j 4, -j 8, -j 15, each timed from the script's own log.
# 2. `advisor profile` of -j 4 with --try of the loader knobs: persistent_workers
#    (loader-restarts, run-relative: every trial then runs over two more epoch starts) and
#    num_workers=15 (a knob written out is timed on the settled steps: the step-level view; the
#    logs of 1. give the run-level one).
# 3. The table: python3 benchmarks/public/parse_loader_logs.py --slow $W (also run here, into
#    $OUT/table.txt).
set -u
R=$PWD; W=/tmp/w5l; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-480}
ARCH=${ARCH:-resnet50}; EPOCHS=${EPOCHS:-4}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 30 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s%N); timeout $to "$@" > $W/logs/$name.log 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t) / 1000000 ))
  echo "$ms" > $W/logs/$name.wall_ms
  echo "[$name] rc=$rc ${ms}ms (at $(( $(date +%s) - T0 ))s)"; }
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
python3 benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1
echo "[synth] $(( $(date +%s) - T0 ))s"
mkdir -p $W/run && cp .carry/imagenet/main.py $W/run/ && cd $W/run
M="main.py -a $ARCH -b 256 --epochs $EPOCHS -p 1 $W/imnet"
for j in 4 8 15; do run j$j 90 python3 $M -j $j; done
run try_j4 270 advisor profile --try loader-restarts,loader:persistent_workers=true,loader:num_workers=15 \
  --try-runs 1 --try-steps 30 --try-time 15 --out $W/rep/try --json $W/rep/try.json $M -j 4
cp $W/rep/try/steps_rank0.json $W/rep/ 2>/dev/null
cd $R
python3 benchmarks/public/parse_loader_logs.py --slow $W > $W/table.txt 2>&1; cat $W/table.txt
cp $W/table.txt $OUT/
rm -rf $W/rep/try/try/scratch; find $W/rep -name '*.json.gz' -size +8M -delete
tar -czf $W/all.tgz -C $W logs rep table.txt; split -b 15m $W/all.tgz $OUT/all.tgz.part-
echo "[total] $(( $(date +%s) - T0 ))s"
