#!/bin/bash
# Wave 5, issue 32, second call: the hooks alone against plain on nanoGPT char (launch-bound),
# more rounds after a warm-up run that is not counted (the first call's plain runs went from
# 15.8 to 10.8 ms as the machine warmed: round-to-round noise of up to 25%), 1,000 iterations
# a run. From the repository root with .carry/, .whl/.
set -u
R=$PWD; W=/tmp/w18; mkdir -p $W/logs; T0=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
timeout ${HARD:-560} python3 "$R/benchmarks/real_script_ab.py" --warmup 1 --pairs ${PAIRS:-7} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=1000 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab2.log
cp $W/logs/* $OUT/ 2>/dev/null; echo "[total] $(( $(date +%s) - T0 ))s"
