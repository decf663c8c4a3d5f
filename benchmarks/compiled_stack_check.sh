#!/bin/bash
# Issue #14: torch.profiler-with-stacks captures of compiled steps under `advisor profile` (its
# default), the steps outside the window timed: nanoGPT train.py --compile=True and the
# compiler-fusion scenario's compiled variant. Beside HF run_clm.py --torch_compile
# (hf_stack_check.sh), what a bare trace of a compiled step is good to. Carry .carry-cal
# (ext/nanoGPT, the nvtx wheel). Results: $OUT/res.tar.NN.
set -u
T0=$(date +%s); W=/tmp/cc; mkdir -p $W
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1 || tail -5 /tmp/pip.log
python3 -c "import nvtx" 2>/dev/null || python3 -m pip install -q --no-deps .carry-cal/nvtx-*.whl
python3 -c "import msgspec" 2>/dev/null || python3 -m pip install -q --no-deps .carry-cal/msgspec-*.whl  # advisor's own dependency; not in the device image
N=$PWD/.carry-cal/ext/nanoGPT
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import unprofiled_check as u; from pathlib import Path; u.make_nanogpt_data(Path('$N'), False)"
AP="python3 -m advisor.cli profile -q --steps 4 --then continue"
(cd $N && timeout 220 $AP --out $W/nanogpt-compile-kineto train.py config/train_shakespeare_char.py \
  --compile=True --log_interval=1 --eval_interval=1000 --eval_iters=5 --max_iters=300 \
  --out_dir=$W/no > $W/nanogpt-compile.log 2>&1); echo "[nanogpt] $(( $(date +%s) - T0 ))s"
timeout 200 $AP --out $W/compiler-fusion-good-kineto benchmarks/scenarios/compiler-fusion/scenario.py \
  --variant good --steps 100 > $W/compiler-fusion-good.log 2>&1; echo "[scenario] $(( $(date +%s) - T0 ))s"
rm -rf $W/no; cd $W && tar -cf /tmp/res.tar . && split -b 15m -d /tmp/res.tar "$OUT/res.tar."
ls -la $OUT; du -sh $W/*
