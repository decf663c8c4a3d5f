#!/bin/bash
# Wave 7, issue 32's overhead with the drift cancelled: nanoGPT train_shakespeare_char.py,
# compile off (launch-bound), unmodified; plain and `advisor profile` side by side on the same
# GPU, each pinned to its own 4 cores, swapped every round, both cut to the seconds they share
# (benchmarks/real_script_ab.py --concurrent); plain beside plain gives the floor. Variants: the
# hooks alone (no window) and the default window (`--then continue`, the analysis beside the
# job). Iterations 100-1199 of each run from the script's own log. From the repository root
# with .carry/, .whl/.
source benchmarks/public/wave6_common.sh
cp -r .carry/nanogpt $W/ng && cd $W/ng
timeout $(( HARD - 30 )) python3 "$R/benchmarks/real_script_ab.py" --concurrent ${CORES:-2-5:10-13} \
  --pairs ${PAIRS:-4} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" --variant "window=--then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=1200 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab_concurrent.log | tail -20
mkdir -p $OUT/c && cp $W/logs/ab_concurrent.log $W/logs/gpu.csv $OUT/c/
echo "[total] $(( $(date +%s) - T0 ))s"
