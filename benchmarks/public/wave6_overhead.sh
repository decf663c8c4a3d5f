#!/bin/bash
# Wave 6, third call (issue 32's overhead targets): nanoGPT train_shakespeare_char.py, compile
# off (launch-bound), unmodified, plain against `advisor profile` with the hooks alone (no
# window) and with the default window (analysis beside the job), interleaved A/B rounds after one
# warm-up run, iterations 100-799 of each run from the script's own log
# (benchmarks/real_script_ab.py). From the repository root with .carry/, .whl/.
source benchmarks/public/wave6_common.sh
cp -r .carry/nanogpt $W/ng && cd $W/ng
timeout $(( HARD - 30 )) python3 "$R/benchmarks/real_script_ab.py" --warmup 1 --pairs ${PAIRS:-5} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" --variant "window=--then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=800 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab.log | tail -30
ship
