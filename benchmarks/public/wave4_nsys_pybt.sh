#!/bin/bash
# Issue 37, third H100 call: Python backtraces on CUDA calls (--python-backtrace=cuda) and Python
# sampling, with nsys's CPU sampler on (--sample=process-tree; the second call showed it available): what they cost a launch-bound job (nanoGPT shakespeare_char, compile off, ~21 ms/iteration),
# from the script's own log, and what it records. From the repository root with .carry/, .whl/,
# .device-kit. `nsys status -e` first: whether this machine lets nsys sample CPUs at all.
set -u
R=$PWD; W=/tmp/w7; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-575}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
source .device-kit/nsys-env.sh
nsys status -e > $W/logs/nsys_status.log 2>&1; echo "nsys status -e rc=$?"; cat $W/logs/nsys_status.log | head -20
cat /proc/sys/kernel/perf_event_paranoid
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 40 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
CH="train.py config/train_shakespeare_char.py --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False --out_dir=$W/o --compile=False --max_iters=400"
P="advisor profile --nsys --then continue"
run plain 60 python3 $CH
run default 80 $P --out $W/rep/default --json $W/rep/default.json $CH
S="--nsys-option=--sample=process-tree"
run sampled 80 $P $S --out $W/rep/sampled --json $W/rep/sampled.json $CH
run pybt 90 $P $S --nsys-option=--python-backtrace=cuda --out $W/rep/pybt --json $W/rep/pybt.json $CH
run pysample 90 $P $S --nsys-option=--python-sampling=true --out $W/rep/pysample --json $W/rep/pysample.json $CH
python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=1 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2 --compile=False --max_iters=150"
run gpt2_pybt 110 $P $S --nsys-option=--python-backtrace=cuda --out $W/rep/gpt2_pybt --json $W/rep/gpt2_pybt.json $G2
run plain2 60 python3 $CH
for d in $W/rep/*/; do [ -f $d/nsys_rank0.sqlite ] && python3 - $d/nsys_rank0.sqlite <<'PY' >> $W/logs/tables.log 2>&1
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); print(sys.argv[1])
for (t,) in c.execute("select name from sqlite_master where type='table' order by name"):
    print("  ", t, c.execute(f"select count(*) from [{t}]").fetchone()[0])
PY
done
find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name '*.sqlite' -exec xz -T4 -6 {} \;
tar -cf $W/all.tar -C $W logs rep 2>/dev/null; split -b 15m $W/all.tar $OUT/all.tar.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
