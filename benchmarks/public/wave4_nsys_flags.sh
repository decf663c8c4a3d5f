#!/bin/bash
# Issue 37 on the H100, one device call from the repository root, with .carry/ (dist/ the wheel
# built here; nanogpt/ karpathy/nanoGPT @ 3adf61e), .whl/ and .device-kit (nsys):
#   plain / compiled  nanoGPT GPT-2 124M (synthetic tokens, batch 16), compile off and on,
#                     unmodified, timed from its own log (the fix by the script's own knob)
#   nsys_*            `advisor profile --nsys` of the eager run with more nsys options:
#                     default, --pytorch=autograd-nvtx, --python-backtrace=cuda, both;
#                     the iterations outside the window (the script's log) give each one's cost
# Everything ends by HARD seconds; logs, reports and the SQLite exports (xz) come back in $OUT.
set -u
R=$PWD; W=/tmp/w5; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-575}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
nsys --version > $W/logs/nsys_help.log 2>&1
nsys profile --help 2>&1 | grep -A12 -e '--pytorch' -e '--python-backtrace' -e '--python-sampling' >> $W/logs/nsys_help.log
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 40 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2"
run plain 60 python3 $G2 --compile=False --max_iters=200
run compiled 150 python3 $G2 --compile=True --max_iters=200
P="advisor profile --nsys --then continue"
run nsys_default 110 $P --out $W/rep/default --json $W/rep/default.json $G2 --compile=False --max_iters=150
run nsys_autograd 110 $P --nsys-option=--pytorch=autograd-nvtx --out $W/rep/autograd --json $W/rep/autograd.json $G2 --compile=False --max_iters=150
run nsys_pybt 110 $P --nsys-option=--python-backtrace=cuda --out $W/rep/pybt --json $W/rep/pybt.json $G2 --compile=False --max_iters=150
run nsys_both 110 $P --nsys-option=--pytorch=autograd-nvtx --nsys-option=--python-backtrace=cuda --out $W/rep/both --json $W/rep/both.json $G2 --compile=False --max_iters=150
find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name '*.sqlite' -exec xz -T4 -6 {} \;
tar -cf $W/all.tar -C $W logs rep 2>/dev/null; split -b 15m $W/all.tar $OUT/all.tar.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
