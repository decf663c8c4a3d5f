#!/bin/bash
# Wave 5, issue 32: where the hooks' mean overhead on nanoGPT char (launch-bound) comes from.
# benchmarks/real_script_ab.py, PAIRS rounds of plain / hooks / hooks with advisor's own objects
# frozen out of the collector (ADVISOR_GC_FREEZE=1: gc.freeze() before torch is imported) / the
# default window; every process's garbage collections logged by benchmarks/public/gcstat
# (GCSTAT), and each run's slow iterations. From the repository root with .carry/, .whl/.
set -u
R=$PWD; W=/tmp/w15; mkdir -p $W/logs; T0=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
SP=$(python3 -c "import site; print(site.getsitepackages()[0])")
cp benchmarks/public/gcstat/gcstat_hook.py benchmarks/public/gcstat/gcstat.pth "$SP"/
export GCSTAT=$W/logs/gcstat.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
timeout ${HARD:-540} python3 "$R/benchmarks/real_script_ab.py" --pairs ${PAIRS:-4} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" \
  --variant "hooks-freeze=ADVISOR_GC_FREEZE=1 --wait 1000000 --then continue" \
  --variant "window=--then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=500 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab.log
echo "--- gcstat"; grep -v 'analysis_process' $GCSTAT | cut -c1-400
cp $W/logs/* $OUT/ 2>/dev/null; echo "[total] $(( $(date +%s) - T0 ))s"
