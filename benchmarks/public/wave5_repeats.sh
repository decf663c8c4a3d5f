#!/bin/bash
# Issue 35: every check-set scenario's bad and fixed variants timed in 3 separate process runs
# (SCENARIO_SHAPE=check, benchmarks/scenarios/harness.py timing: 15 warm-up + 50 steps, CUDA
# events, no profiler, one fresh process per run), runs interleaved (run 1 of every variant, then
# run 2, ...) so a drift of the machine hits every variant alike. One H100 (nvidia-h100-x1), no
# carry needed (torch and triton of the device image; nothing of advisor is installed).
#
# 12 rules x 2 variants x 3 runs is ~72 processes of 6-15 s: more than one call holds, so the
# rules come as arguments, in two calls (each < 540 s; HARD cuts it, a skipped run is said):
# (the two scenarios whose fixed variant compiles, compiler-fusion and fp8-candidate, ~15 s a first
# process, one in each call; Inductor's cache makes the second and third runs of it cheaper):
#   run(kind="nvidia-h100-x1", timeout_s=600, command="bash benchmarks/public/wave5_repeats.sh \
#       compiler-fusion cpu-bound-loss host-sync loader-jitter pageable-memcpy unfused-gemm-gelu")
#   run(kind="nvidia-h100-x1", timeout_s=600, command="bash benchmarks/public/wave5_repeats.sh \
#       fp8-candidate rng-bound-dropout fp32-matmul gemm-shape-alignment uncaptured-cuda-graph unfused-attention")
# A run the deadline skips is said ("SKIP"); a variant with fewer than 3 runs is shown, not used.
# Back here, for each call's files: tar -xf <(cat <files_at>/runs.tar.part-*) -C /tmp/rep, then
#   python benchmarks/public/repeats_table.py /tmp/rep/runs --write fixtures/scenarios-check/repeats.json
#   python benchmarks/validate_rules.py --set check --markdown   # measured = median of 3 runs
# and update each rule's `validation` record (runs=3, measured) as tests/test_validation_record.py says.
set -u
R=$PWD; W=/tmp/w5rep; rm -rf $W; mkdir -p $W/runs $W/logs; T0=$(date +%s); HARD=${HARD:-530}
RUNS=${RUNS:-3}
export PYTHONUNBUFFERED=1 SCENARIO_SHAPE=check
RULES=("$@")
[ ${#RULES[@]} -gt 0 ] || RULES=(compiler-fusion cpu-bound-loss fp32-matmul fp8-candidate gemm-shape-alignment host-sync loader-jitter pageable-memcpy rng-bound-dropout uncaptured-cuda-graph unfused-attention unfused-gemm-gelu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
cd $R/benchmarks/scenarios
for k in $(seq 1 $RUNS); do
  for r in "${RULES[@]}"; do
    for v in bad good; do
      left=$(( HARD - 25 - $(date +%s) + T0 ))
      if [ $left -lt 20 ]; then echo "SKIP (deadline): run$k $r/$v"; continue; fi
      to=$(( left < 120 ? left : 120 )); d=$W/runs/run$k/$r/$v; mkdir -p $d; t=$(date +%s)
      timeout $to python3 harness.py timing --scenario $r --variant $v --out $d --warmup 15 --steps 50 \
        > $W/logs/run$k-$r-$v.log 2>&1
      echo "[run$k $r/$v] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s) $(grep -o 'mean [0-9.]* ms' $W/logs/run$k-$r-$v.log)"
    done
  done
done
cd $R && python3 benchmarks/public/repeats_table.py $W/runs | tee $W/table.txt
tar -cf $W/runs.tar -C $W runs logs table.txt && split -b 15m $W/runs.tar $OUT/runs.tar.part-
cp $W/table.txt $OUT/; ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"
