#!/bin/bash
# Issue 35: a real job with 3 or more ranks for `load-imbalance`. benchmarks/public/ddp_imbalance.py
# under DDP (NCCL, one rank per GPU: NCCL refuses two ranks on one device, "Duplicate GPU
# detected", so 4 ranks need 4 GPUs: kind nvidia-h100-x4; on 2 GPUs this script stops and says so):
#   plain  imbalanced / balanced (the fix: the same tokens per step, spread evenly), each in 3
#          separate torchrun launches, timed from rank 0's own log (step_ms median), no profiler
#   torch  `advisor profile --then continue torchrun ...` on the imbalanced job and on the
#          balanced one (torch.profiler, every rank's trace)
# From the repository root with .carry/dist (the advisor wheel, `python -m build -w -o .carry/dist`)
# and .whl (its dependencies' wheels), as wave4_ddp_nsys.sh:
#   run(kind="nvidia-h100-x4", carry=[".carry", ".whl"], timeout_s=600,
#       command="bash benchmarks/public/wave5_jobs.sh")
# Back here: cat <files_at>/all.tar.part-* | tar -xf - -C /tmp/w5jobs; the rank traces are
# /tmp/w5jobs/rep/{imbalanced,balanced}/trace_rank*.json.gz (`advisor analyze` them together),
# the measured speedup the median imbalanced step over the median balanced one (logs/plain-*.log).
set -u
R=$PWD; W=/tmp/w5jobs; rm -rf $W; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-480}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NGPU=$(nvidia-smi -L | wc -l); NPROC=${NPROC:-$NGPU}
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "$NPROC" -lt 3 ] || [ "$NPROC" -gt "$NGPU" ]; then
  echo "error: $NPROC ranks on $NGPU GPUs: load-imbalance needs 3 or more ranks, NCCL one GPU each (kind nvidia-h100-x4)"; exit 2; fi
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 30 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s) $(grep -o 'step_ms median=[0-9.]*' $W/logs/$name.log)"; }
TR="torchrun --standalone --nproc_per_node=$NPROC"
S=$R/benchmarks/public/ddp_imbalance.py
for k in 1 2 3; do  # interleaved: a drift of the machine hits both variants
  run plain-imbalanced-$k 90 $TR $S --variant imbalanced --steps 60
  run plain-balanced-$k 90 $TR $S --variant balanced --steps 60
done
for v in imbalanced balanced; do
  run torch-$v 150 advisor profile --then continue --out $W/rep/$v --json $W/rep/$v.json --html $W/rep/$v.html $TR $S --variant $v --steps 150
done
python3 - $W/logs <<'PY' | tee $W/logs/table.txt
import re, statistics, sys, pathlib
d = pathlib.Path(sys.argv[1]); med = {}
for v in ("imbalanced", "balanced"):
    runs = [float(m.group(1)) for f in sorted(d.glob(f"plain-{v}-*.log"))
            for m in [re.search(r"step_ms mean=[0-9.]+ median=([0-9.]+)", f.read_text())] if m]
    med[v] = statistics.median(runs) if runs else None
    print(f"{v:11} runs {runs} median {med[v]}")
if all(med.values()):
    print(f"measured speedup of the fix (median imbalanced / median balanced): {med['imbalanced'] / med['balanced']:.3f}x")
PY
tar -cf $W/all.tar -C $W logs rep 2>/dev/null; split -b 15m $W/all.tar $OUT/all.tar.part-
ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
