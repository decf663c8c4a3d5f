#!/bin/bash
# One device call for issue 14's bare-trace calibration (fourth pass): torch.profiler's cost per
# recorded event measured one kind of event at a time (profiler_calibration.py's single-event
# workloads, traced blocks alternating with plain blocks in one process, shapes with and without
# stacks), then host-bound workloads under `advisor profile` (its default: shapes and stacks),
# whose steps outside the window are their plain figure, every trace kept. Run from the
# repository root on the device, carrying .device-kit (nsys) and .carry-cal (ext/nanoGPT,
# fetched, never committed; the nvtx wheel). Results: $OUT/res.tar.NN (15 MB pieces).
# The lists are overridable: SKIP_CAL=1, CAL_WORKLOADS, ROUNDS, NOSTACK=0, B_NAMES, C_NAMES, A_NAMES (the
# second call of 2026-11-23 repeated the workloads and added host-sync and compiler-fusion).
set -u
CARRY=${CARRY:-$PWD/.carry-cal}; T0=$(date +%s); BUDGET=${BUDGET:-560}
source .device-kit/nsys-env.sh
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/pip.log 2>&1 || tail -5 /tmp/pip.log
python3 -c "import nvtx" 2>/dev/null || python3 -m pip install -q --no-deps "$CARRY"/nvtx-*.whl
python3 -c "import msgspec" 2>/dev/null || python3 -m pip install -q --no-deps "$CARRY"/msgspec-*.whl  # advisor's own dependency; not in the device image
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; python3 -c "import torch; print(torch.__version__)"
W=/tmp/cal; mkdir -p $W
left() { echo $(( BUDGET - $(date +%s) + T0 - ${1:-0} )); }
CAL="python3 benchmarks/profiler_calibration.py"
SINGLES="--workload pyfunc --workload builtin --workload cpu-op --workload cuda-view --workload cuda-op --workload deep-op"
if [ "${SKIP_CAL:-0}" != 1 ]; then
ALL=${CAL_WORKLOADS:-"--workload chain --workload views --workload mlp $SINGLES"}
timeout 150 $CAL --mode kineto-stack $ALL --rounds ${ROUNDS:-3} --out $W/cal-kineto-stack > $W/cal-kineto-stack.log 2>&1
[ "${NOSTACK:-1}" = 1 ] && timeout 90 $CAL --mode kineto $ALL --rounds 2 --out $W/cal-kineto > $W/cal-kineto.log 2>&1
echo "[calibration] $(( $(date +%s) - T0 ))s"; grep -h "^calibration" $W/cal-*.log
fi
C="python3 benchmarks/unprofiled_check.py collect --out $W --ext $CARRY/ext --job-timeout 100"
$C --part B --per-class 2 --names ${B_NAMES:-uncaptured-cuda-graph-kineto,uncaptured-cuda-graph-plain,cpu-bound-loss-kineto,cpu-bound-loss-plain} --deadline $(left 330)
$C --part C --names ${C_NAMES:-fw-hf-kineto,fw-lightning-kineto} --deadline $(left 230)
$C --part A --names ${A_NAMES:-nanogpt-plain,nanogpt-kineto} --deadline $(left 110)
echo "[collect] $(( $(date +%s) - T0 ))s"
rm -rf $W/images $W/nanogpt-out $W/timm-out
cd $W && tar -cf /tmp/res.tar . && cd /tmp && split -b 15m -d res.tar "$OUT/res.tar."
ls -la $OUT; du -sh $W/* | sort -h | tail -8
