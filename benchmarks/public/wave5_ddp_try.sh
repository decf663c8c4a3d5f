#!/bin/bash
# Issue 36, "a multi-rank trial on two GPUs": nanoGPT GPT-2 124M under DDP (torchrun, 2 ranks,
# synthetic tokens, batch 16 per rank, as wave4_ddp_nsys.sh), unmodified:
#   plain / compiled  by hand: --compile=False and --compile=True, each timed from rank 0's own
#                     log (`iter N: ... time X ms`, mean over iterations after 20)
#   try               `advisor profile --wait 20 --try compile torchrun ... --compile=False`:
#                     the trials run under the same torchrun line, every rank stops after step
#                     40 + --try-steps, the job's step is the slowest rank's
# summary.txt in $OUT: both figures side by side. From the repository root with .carry/
# (dist/ the wheel; nanogpt/) and .whl/. At most ~300 s.
set -u
R=$PWD; W=/tmp/w36; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-295}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 15 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
cp -r $R/.carry/nanogpt $W/ng && cd $W/ng
python3 $R/benchmarks/public/synth_data.py tokens $W/ng/data/synth
TR="torchrun --standalone --nproc_per_node=2"
G2="train.py --dataset=synth --batch_size=16 --gradient_accumulation_steps=2 --eval_interval=100000 --eval_iters=1 --log_interval=1 --always_save_checkpoint=False --out_dir=$W/o2"
# --try first (the check itself), then the by-hand pair; run() skips what the deadline leaves
# no room for. Each trial stops every rank after step 40 + 15; the profiled job after its
# pinned window (--wait 20) and the steps after it.
run try 175 advisor profile --wait 20 --steps 3 --try compile --try-runs 1 --try-steps 15 --out $W/rep/try --json $W/rep/try.json --html $W/rep/try.html $TR $G2 --compile=False --max_iters=300
run plain 45 $TR $G2 --compile=False --max_iters=70
run compiled 90 $TR $G2 --compile=True --max_iters=70
python3 - $W > $W/summary.txt 2>&1 <<'PY'
import json, re, statistics, sys
from pathlib import Path
w = Path(sys.argv[1])
def by_hand(name):
    text = (w / "logs" / f"{name}.log").read_text(errors="replace")
    ms = [float(t) for i, t in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", text) if int(i) > 20]
    return statistics.fmean(ms) if ms else None, len(ms)
(p, pn), (c, cn) = by_hand("plain"), by_hand("compiled")
print(f"by hand (rank 0's log, iterations > 20): plain {p} ms ({pn}), compiled {c} ms ({cn})"
      + (f", speedup {p / c:.3f}x" if p and c else ""))
try:
    t = json.loads((w / "rep" / "try.json").read_text())["tried"]
    print("advisor --try:", t["statistic"], "; order", t["order"], "; plain_step_ms", t["plain_step_ms"])
    for f in t["fixes"]:
        print(" ", f["label"], f["status"], "measured", f.get("measured_speedup"),
              "step_ms", f.get("step_ms"), "reason", f.get("reason"), "applied", f.get("applied"))
    for res in sorted((w / "rep" / "try" / "try").glob("*.result.rank*.json")):
        r = json.loads(res.read_text())
        print("   ", res.name, r["status"], "mean_ms", r["mean_ns"] and r["mean_ns"] / 1e6,
              "settled_at", r["settled_at"], "stopped_at", r["stopped_at"], "timed", r["steps_timed"])
except (OSError, ValueError, KeyError) as e:
    print("no --try result:", e)
PY
cat $W/summary.txt; cp $W/summary.txt $OUT/
rm -rf $W/rep/try/try/scratch; find $W/rep -name '*.json.gz' -size +8M -delete
tar -czf $W/all.tgz -C $W logs rep summary.txt; split -b 15m $W/all.tgz $OUT/all.tgz.part-
echo "[total] $(( $(date +%s) - T0 ))s"
