#!/bin/bash
# Issue 37 on two H100s: nanoGPT GPT-2 124M under DDP (torchrun, 2 ranks, synthetic tokens,
# batch 16 per rank, compile off), unmodified:
#   plain / compiled   timed from its own log (rank 0 prints), compile off and on (the fix)
#   nsys / torch       `advisor profile --nsys torchrun ...` and `advisor profile torchrun ...`
# From the repository root with .carry/ (dist/ the wheel; nanogpt/), .whl/, .device-kit.
# Reports and the rank exports (xz) come back in $OUT; `advisor analyze` can be re-run on them.
set -u
R=$PWD; W=/tmp/w9; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-580}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 40 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
TR="torchrun --standalone --nproc_per_node=2"
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=2 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2"
run plain 90 $TR $G2 --compile=False --max_iters=200
run compiled 180 $TR $G2 --compile=True --max_iters=200
run nsys 150 advisor profile --nsys --then continue --out $W/rep/nsys --json $W/rep/nsys.json --html $W/rep/nsys.html $TR $G2 --compile=False --max_iters=150
run torch 150 advisor profile --then continue --out $W/rep/torch --json $W/rep/torch.json $TR $G2 --compile=False --max_iters=150
find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name '*.sqlite' -exec xz -T8 -6 {} \;
tar -cf $W/all.tar -C $W logs rep 2>/dev/null; split -b 15m $W/all.tar $OUT/all.tar.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
