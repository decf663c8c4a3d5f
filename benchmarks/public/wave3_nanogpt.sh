#!/bin/bash
# Wave 3 on the H100, one device call, from the repository root, with .carry/ (dist/ the wheel
# built here, nanogpt/ karpathy/nanoGPT @ 3adf61e train.py, model.py, configurator.py,
# config/train_shakespeare_char.py and data/shakespeare_char from unprofiled_check.make_nanogpt_data)
# and .whl/ (advisor's dependencies the device image lacks: dask, msgspec, jsonschema, nvtx ...):
#   1. advisor installed from the built wheel as a user installs it (pip, no editable install);
#   2. nanoGPT shakespeare_char, compile off, unmodified, timed from its own log: eager and
#      --compile=True (the fix by the script's own knob);
#   3. `advisor profile` of the eager run, torch.profiler and --nsys (issue 33: the phase the
#      hooks call 'loss' is get_batch, data preparation; issue 32: the step against the log);
#   4. `advisor profile --try` of the eager run (issue 36): advisor's measured speedups.
# Logs and reports come back in $OUT/wave3.tgz; parse with benchmarks/public/wave3_parse.py.
set -u
R=$PWD; W=/tmp/w3; mkdir -p $W/logs $W/rep; T0=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
[ -f .device-kit/nsys-env.sh ] && source .device-kit/nsys-env.sh
run() { local name=$1 to=$2; shift 2; local t=$(date +%s)
  timeout $to "$@" > $W/logs/$name.log 2>&1; echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
NG="train.py config/train_shakespeare_char.py --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False --out_dir=$W/o"
run eager 90 python3 $NG --compile=False --max_iters=600
run compiled 180 python3 $NG --compile=True --max_iters=600
run prof_torch 120 advisor profile --out $W/rep/torch --json $W/rep/torch.json --html $W/rep/torch.html $NG --compile=False --max_iters=600
run prof_nsys 150 advisor profile --nsys --out $W/rep/nsys --json $W/rep/nsys.json $NG --compile=False --max_iters=600
run try ${TRY_S:-330} advisor profile --try --try-runs 2 --try-steps 50 --try-time 20 --out $W/rep/try --json $W/rep/try.json --html $W/rep/try.html $NG --compile=False --max_iters=3000
find $W/rep -name '*.sqlite' -exec gzip -f {} \; ; find $W/rep -name '*.nsys-rep' -delete
tar -czf $OUT/wave3.tgz -C $W logs rep; ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
