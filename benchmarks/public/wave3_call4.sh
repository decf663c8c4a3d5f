#!/bin/bash
# Wave 3, second device call of the merged tree (issues 32, 33, 36, 38), from the repository root
# with .carry/ (dist/ the built wheel; nanogpt/ karpathy/nanoGPT @ 3adf61e with
# data/shakespeare_char) and .whl/ (advisor's dependencies the image lacks), .device-kit (nsys):
#   gemm     benchmarks/gemm_efficiency.py: achieved TFLOP/s from the trace against timing
#   char     nanoGPT shakespeare_char, compile off, under `advisor profile` (step against its log)
#   try      `advisor profile --try` of the same (a warm-up run, then 2 interleaved rounds)
#   gpt2     nanoGPT GPT-2 124M (synthetic tokens, batch 16, compile off) under `advisor profile`
#   scen     the gemm-shape-alignment scenario (benchmarks/scenarios/capture.py), last
# Everything ends by HARD seconds; logs and reports come back in $OUT (tar split in 15 MB parts).
set -u
R=$PWD; W=/tmp/w4; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-570}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
CH="train.py config/train_shakespeare_char.py --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False --out_dir=$W/o --compile=False"
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2 --compile=False"
run char 100 advisor profile --out $W/rep/char --json $W/rep/char.json $CH --max_iters=600
run try 200 advisor profile --try --try-runs 2 --try-steps 50 --try-time 20 --out $W/rep/try --json $W/rep/try.json $CH --max_iters=3000
run gpt2 100 advisor profile --out $W/rep/gpt2 --json $W/rep/gpt2.json $G2 --max_iters=200
cd $R
run gemm 100 python3 benchmarks/gemm_efficiency.py --out $W/rep/eff
(cd benchmarks/scenarios && run scen 400 python3 capture.py --out $W/res --timeout 100 gemm-shape-alignment)
find $W/rep -name '*.nsys-rep' -delete; rm -rf $W/rep/try/try/scratch
tar -czf $W/all.tgz -C $W logs rep res 2>/dev/null; split -b 15m $W/all.tgz $OUT/all.tgz.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
