#!/bin/bash
# Wave 4 on the H100, from the repository root with .carry/ (dist/ the wheel; nanogpt/ with
# data/shakespeare_char), .whl/, .device-kit:
#   nsys_src   `advisor profile --nsys` of nanoGPT shakespeare_char (compile off): the window's
#              Python stacks sampled by advisor (issue 37: source lines on nsys captures; no torch
#              INTERNAL ASSERT in the log), then `advisor analyze` of the export from the script's
#              folder; nsys_nostacks the same with --no-stacks (the sampler's cost, recorded steps)
#   overhead   benchmarks/public/overhead_ab.sh (issue 32: the hooks' cost after the hot-path
#              changes), PAIRS rounds, iterations 100-499 from the script's own log
set -u
R=$PWD; W=/tmp/w10; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 30 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
CH="train.py config/train_shakespeare_char.py --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False --out_dir=$W/o --compile=False --max_iters=400"
run nsys_src 90 advisor profile --nsys --then continue --out $W/rep/src --json $W/rep/src.json --html $W/rep/src.html $CH
run analyze_src 60 advisor analyze $W/rep/src/nsys_rank0.sqlite --json $W/rep/src_analyze.json
run nsys_nostacks 90 advisor profile --nsys --no-stacks --then continue --out $W/rep/nostacks --json $W/rep/nostacks.json $CH
grep -c "INTERNAL ASSERT" $W/logs/nsys_src.log $W/logs/nsys_nostacks.log
run overhead $(( HARD - 60 - $(date +%s) + T0 )) env NG=$W/ng bash $R/benchmarks/public/overhead_ab.sh ${PAIRS:-2}
find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name '*.sqlite' -exec xz -T8 -6 {} \;
tar -czf $W/all.tgz -C $W logs rep 2>/dev/null; split -b 15m $W/all.tgz $OUT/all.tgz.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
