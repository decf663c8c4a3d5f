#!/usr/bin/env bash
# Wave 12 (issue #35): unfused-gemm-gelu's fix timed on the fixed scenario steps it is raised on
# (tests/healthy_findings.py, UNMEASURED). The fix is the GELU in the GEMM's cuBLASLt epilogue
# (GELU_AUX_BIAS), as Transformer Engine's fused MLP runs it (benchmarks/scenarios/gelu_epilogue.py;
# TE itself cannot be installed on the device). From the repository root, on one GPU:
#
#   run(kind="nvidia-h200", timeout_s=600, command="bash benchmarks/public/wave12_gelu.sh")
#
# 1. `gelu_epilogue.py --check`: the extension built, its errors against eager bf16, and the
#    forward's kernel time against eager's GEMM + GELU at every fc1 shape.
# 2. `harness.py ab --fix gelu-epilogue` per step: base and fix in ONE process, alternating
#    blocks (ABBA), as wave 11 timed compile.
# 3. `harness.py torchprof --fix gelu-epilogue` per step: a torch.profiler capture of the fixed
#    step, for `advisor analyze` (the finding must go, the GELU kernels with it).
# Returns gelu.tgz: check.json, <shape>-<scenario>/ab-*.json, captures/<shape>-<scenario>.json.gz,
# logs/. tests/healthy_findings.py reads the ab blocks once packed (benchmarks/public/ab_pack.py).
set -u
W=/tmp/gelu; mkdir -p "$W/logs" "$W/warm" "$W/captures" "${OUT:-/tmp}"; T0=$(date +%s); HARD=${HARD:-540}
export PYTHONUNBUFFERED=1 GELU_EPILOGUE_CACHE=/tmp/gelu_cache; mkdir -p $GELU_EPILOGUE_CACHE
GROUPS_LIST=${GROUPS_LIST:-"fit:pageable-memcpy check:pageable-memcpy check:fp32-matmul fit:unfused-attention fit:compiler-fusion check:compiler-fusion"}
# CAPTURE_LIST: the steps captured with the fix (default: every group; set and empty: none)
BLOCKS=${BLOCKS:-20}; STEPS=${STEPS:-30}; PIN=${PIN:-"taskset -c 8,9,10,11"}
cd benchmarks/scenarios
python3 gelu_epilogue.py --check --out "$W/check.json" > "$W/logs/check.log" 2>&1
rc=$?; cat "$W/logs/check.log"; echo "[check] rc=$rc $(( $(date +%s) - T0 ))s"
if [ $rc -ne 0 ]; then tar czf "${OUT:-/tmp}/gelu.tgz" -C "$W" .; exit 1; fi
# fill Inductor's caches for the compiled steps (both sites), four processes at a time
for g in $GROUPS_LIST; do shape=${g%%:*}; s=${g#*:}; [ "$s" = compiler-fusion ] || continue
  for fix in "" "--fix gelu-epilogue"; do
    SCENARIO_SHAPE=$shape timeout 240 python3 harness.py timing --scenario "$s" --variant good $fix \
      --warmup 2 --steps 3 --out "$W/warm/$shape-$s${fix:+-fix}" > "$W/logs/warm-$shape-$s${fix:+-fix}.log" 2>&1 &
  done
done; wait
echo "[warm done] $(( $(date +%s) - T0 ))s"
for g in $GROUPS_LIST; do shape=${g%%:*}; s=${g#*:}
  rem=$(( HARD - 60 - $(date +%s) + T0 )); [ $rem -ge 40 ] || { echo "SKIP (deadline): $shape $s"; continue; }
  t=$(date +%s)
  SCENARIO_SHAPE=$shape timeout $(( rem < 150 ? rem : 150 )) $PIN python3 harness.py ab --scenario "$s" \
    --variant good --fix gelu-epilogue --warmup 15 --steps "$STEPS" --blocks "$BLOCKS" --out "$W/$shape-$s" \
    > "$W/logs/$shape-$s.log" 2>&1
  echo "[$shape $s] rc=$? $(( $(date +%s) - t ))s"; grep '^\[ab\]' "$W/logs/$shape-$s.log" | tail -4
done
for g in ${CAPTURE_LIST-$GROUPS_LIST}; do shape=${g%%:*}; s=${g#*:}
  rem=$(( HARD - 10 - $(date +%s) + T0 )); [ $rem -ge 25 ] || { echo "SKIP capture (deadline): $shape $s"; continue; }
  SCENARIO_SHAPE=$shape timeout $(( rem < 60 ? rem : 60 )) python3 harness.py torchprof --scenario "$s" \
    --variant good --fix gelu-epilogue --warmup 5 --out "$W/cap-$shape-$s" > "$W/logs/cap-$shape-$s.log" 2>&1
  echo "[capture $shape $s] rc=$?"; [ -f "$W/cap-$shape-$s/trace.json" ] && gzip -c "$W/cap-$shape-$s/trace.json" > "$W/captures/$shape-$s.json.gz"
  rm -rf "$W/cap-$shape-$s"
done
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$W/env.txt" 2>&1
echo "$PIN" > "$W/pin.txt"
rm -rf "$W/warm"; tar czf "${OUT:-/tmp}/gelu.tgz" -C "$W" . 2>/dev/null
echo "[total] $(( $(date +%s) - T0 ))s"
