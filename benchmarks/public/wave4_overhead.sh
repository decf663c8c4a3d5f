#!/bin/bash
# Wave 4, issue 32: the hooks' cost on the launch-bound nanoGPT char job after the hot-path
# changes, benchmarks/public/overhead_ab.sh with PAIRS rounds (iterations 100-499 from the
# script's own log), then GPT-2 124M under `advisor profile --nsys` with the merged tree (issue 37:
# compiler-fusion and source lines). From the repository root with .carry/, .whl/, .device-kit.
set -u
R=$PWD; W=/tmp/w12; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-585}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 30 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng
run overhead 450 env NG=$W/ng bash $R/benchmarks/public/overhead_ab.sh ${PAIRS:-3}
tail -25 $W/logs/overhead.log
cd $W/ng && python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2 --compile=False --max_iters=150"
run gpt2_nsys 100 advisor profile --nsys --then continue --out $W/rep/gpt2 --json $W/rep/gpt2.json $G2
find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name '*.sqlite' -exec xz -T8 -6 {} \;
tar -czf $W/all.tgz -C $W logs rep 2>/dev/null; split -b 15m $W/all.tgz $OUT/all.tgz.part-
echo "[total] $(( $(date +%s) - T0 ))s"
