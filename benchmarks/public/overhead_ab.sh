#!/bin/bash
# What advisor profile costs nanoGPT's train_shakespeare_char.py (compile off, launch-bound,
# ~21 ms per iteration on an H100), from the script's own log (issue 32):
#
#   NG=/path/to/nanoGPT bash benchmarks/public/overhead_ab.sh [PAIRS]
#
# NG is a nanoGPT checkout with data/shakespeare_char prepared (train.bin, val.bin, meta.pkl).
# Runs benchmarks/real_script_ab.py there: plain, `advisor profile` with every hook and no window,
# with the default window and the analysis beside the job (--then continue), with the analysis
# after the job (ADVISOR_ANALYSIS_AT_END=1), and under --nsys when nsys is on PATH; PAIRS rounds
# (default 3), iterations 100-499 of each run; prints each run and the table for docs/profile.md.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${NG:?set NG to a nanoGPT checkout with data/shakespeare_char prepared}"
VARIANTS=(--variant "hooks=--wait 1000000 --then continue"
          --variant "window=--then continue"
          --variant "window-analysis-at-end=ADVISOR_ANALYSIS_AT_END=1 --then continue")
if command -v nsys > /dev/null; then VARIANTS+=(--variant "nsys=--nsys --then continue"); fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
cd "$NG"
python3 "$ROOT/benchmarks/real_script_ab.py" --pairs "${1:-3}" --from-iter 100 "${VARIANTS[@]}" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=500 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False
