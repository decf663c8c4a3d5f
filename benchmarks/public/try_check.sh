#!/bin/bash
# Issue 36: `advisor profile --try` on nanoGPT train.py, unmodified and eager (--compile=False):
# advisor's measured speedups of the knob fixes (torch.compile for compiler-fusion,
# mode="reduce-overhead" for uncaptured-cuda-graph) beside the same fix timed by hand from the
# script's own log (--compile=True). Two device calls, each from the repository root:
#   bash benchmarks/public/try_check.sh hand   # the script's own log, eager and compiled
#   bash benchmarks/public/try_check.sh try    # advisor profile --try (2 interleaved rounds)
# Carry .carry/nanogpt/{train.py,model.py,configurator.py} (karpathy/nanoGPT @ 3adf61e) and
# .carry/msgspec-*.whl (advisor's dependency; not in the device image). Results under $OUT:
# logs, the --try JSON and HTML, the trials' results; parse the hand logs with
# `python3 benchmarks/public/parse_logs.py DIR`.
set -u
PART=${1:-try}; R=$PWD; C=$PWD/.carry; W=/tmp/try; mkdir -p $W/logs "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation -e . > $W/logs/pip.log 2>&1 || tail -5 $W/logs/pip.log
python3 -c "import msgspec" 2>/dev/null || python3 -m pip install -q --no-deps $C/msgspec-*.whl
[ -f $W/ng/data/synth/train.bin ] || { mkdir -p $W/ng && cp $C/nanogpt/*.py $W/ng/ &&
  python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth; }
cd $W/ng
NG="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=2 --log_interval=1 --out_dir=$W/ng_out --always_save_checkpoint=False"
if [ "$PART" = hand ]; then
  timeout 150 python3 $NG --max_iters=80 --compile=False > $OUT/nanogpt_eager.log 2>&1; echo "[eager] rc=$?"
  timeout 300 python3 $NG --max_iters=80 --compile=True > $OUT/nanogpt_compile.log 2>&1; echo "[compile] rc=$?"
  python3 $R/benchmarks/public/parse_logs.py $OUT
else
  timeout 560 python3 -m advisor.cli profile --try --try-runs 2 --try-steps 30 --try-time 20 --out $W/adv \
    --json $OUT/try.json --html $OUT/try.html $NG --max_iters=2000 --compile=False \
    > $OUT/try_stdout.log 2> $OUT/try_stderr.log; echo "[try] rc=$?"
  tail -30 $OUT/try_stderr.log
  mkdir -p $OUT/trials && cp $W/adv/try/*.json $W/adv/try/*.log $OUT/trials/ 2>/dev/null
fi
ls -la $OUT
