#!/bin/bash
# Waves 8 and 9, issue 35 item 3 (no allowlist): time the fix each healthy-trace finding names
# (tests/healthy_findings.py, UNMEASURED) on the fixed scenario step it was raised on, without a
# profiler: benchmarks/scenarios/harness.py's timing mode, 3 processes per variant, the variants
# of a group alternating within each round, one group finished before the next (most findings
# settled first), so the deadline cuts whole groups.
#
# GROUPS: "shape:scenario:v1,v2,..." with v one of
#   base      --variant good                       (the fixed step as captured)
#   compile   --variant good --fix compile         (compiler-fusion's fix; fp8's baseline)
#   fp8       --variant good --fix fp8-compile     (fp8-candidate's compile route, torchao)
#   autotune  --variant good --fix max-autotune-no-cudagraphs
#                                                  (unfused-gemm-gelu's fix; its baseline: compile)
#   eautotune --variant gpt2-eager --fix max-autotune-no-cudagraphs
#                                                  (the same on compiler-fusion, whose good is compiled)
#   closs     --variant good --fix compile-loss    (compiler-fusion's fix with the loss compiled too)
#   bf16      --variant good-bf16                  (fp32-matmul's fix on the graphed MLP)
# Before the timed runs every compiled variant runs once, a few steps, several at a time (WARM_P),
# to fill Inductor's on-disk caches: a timed process then loads its kernels instead of compiling
# them; the code it runs is the same. max-autotune is warmed alone (it benchmarks GEMM configs on
# the GPU). Each run's timing.json comes back in one archive, h.tgz (at most 8 files come back
# from a call; TAR names it, to run the script twice in one call), with its log. A warm-up is
# bounded by the deadline too: max-autotune's GEMM search can take minutes a model, and wave 9's
# second call spent its whole 600 s warming before a timed run. From the repository root, .whl/
# carried (torchao's wheel). PIN (wave 10) prefixes every timed run, e.g. PIN="taskset -c 8-11":
# the host-bound check steps' means moved 20-60% between processes when the scheduler placed
# them freely (wave 8: 4.19 against 5.50 ms on unfused-attention's check step); the runs of one
# call all run under the same PIN, which each archive's README names.
set -u
W=/tmp/w8h; mkdir -p $W/logs $W/warm $OUT; T0=$(date +%s); HARD=${HARD:-560}; WARM_P=${WARM_P:-6}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps .whl/torchao-*.whl > $W/logs/pip.log 2>&1 || tail -3 $W/logs/pip.log
cd benchmarks/scenarios
args() { case $1 in base) echo "--variant good";; compile) echo "--variant good --fix compile";;
  fp8) echo "--variant good --fix fp8-compile";;
  autotune) echo "--variant good --fix max-autotune-no-cudagraphs";;
  eautotune) echo "--variant gpt2-eager --fix max-autotune-no-cudagraphs";; closs) echo "--variant good --fix compile-loss";;
  bf16) echo "--variant good-bf16";; *) echo "unknown variant $1" >&2; return 1;; esac; }
GROUPS_=${GROUPS_LIST:?GROUPS_LIST: the groups to time, see the header}
# warm: every compiled variant once, a few steps, WARM_P at a time
warm1() { SCENARIO_SHAPE=$1 timeout 240 python3 harness.py timing --scenario $2 $(args $3) --warmup 2 --steps 3 \
  --out $W/warm/$1-$2-$3 > $W/logs/warm-$1-$2-$3.log 2>&1; echo "[warm $1 $2 $3] rc=$?"; }
export -f warm1 args; export W
for g in $GROUPS_; do shape=${g%%:*}; rest=${g#*:}; s=${rest%%:*}; IFS=, read -ra vs <<< "${rest#*:}"
  for v in "${vs[@]}"; do case $v in compile|fp8|closs) echo "$shape $s $v";; esac; done
done | sort -u | xargs -P $WARM_P -L 1 bash -c 'warm1 "$@"' _
for g in $GROUPS_; do shape=${g%%:*}; rest=${g#*:}; s=${rest%%:*}; IFS=, read -ra vs <<< "${rest#*:}"
  for v in "${vs[@]}"; do case $v in autotune|eautotune) ;; *) continue;; esac
    rem=$(( HARD - 60 - $(date +%s) + T0 )); [ $rem -ge 60 ] || { echo "SKIP warm (deadline): $shape $s $v"; continue; }
    SCENARIO_SHAPE=$shape timeout $(( rem < 300 ? rem : 300 )) python3 harness.py timing --scenario $s $(args $v) --warmup 2 --steps 3 \
      --out $W/warm/$shape-$s-$v > $W/logs/warm-$shape-$s-$v.log 2>&1; echo "[warm $shape $s $v] rc=$?"; done; done
echo "[warm done] $(( $(date +%s) - T0 ))s"
one() { local shape=$1 s=$2 v=$3 n=$4 rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 40 ] || { echo "SKIP (deadline): $shape $s $v $n"; return 1; }; local t=$(date +%s)
  SCENARIO_SHAPE=$shape timeout $(( rem < 150 ? rem : 150 )) ${PIN:-} python3 harness.py timing --scenario $s $(args $v) \
    --warmup 15 --steps 50 --out $W/$shape-$s-$v-$n > $W/logs/$shape-$s-$v-$n.log 2>&1
  echo "[$shape $s $v $n] rc=$? $(( $(date +%s) - t ))s $(grep -o 'mean [0-9.]* ms' $W/logs/$shape-$s-$v-$n.log | tail -1)"; }
for g in $GROUPS_; do shape=${g%%:*}; rest=${g#*:}; s=${rest%%:*}; IFS=, read -ra vs <<< "${rest#*:}"
  for n in 1 2 3; do for v in "${vs[@]}"; do one $shape $s $v $n || break 3; done; done; done
python3 -c "import torch, torchao; print(torch.__version__, torch.version.cuda, torchao.__version__, torch.cuda.get_device_name())" > $W/env.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >> $W/env.txt 2>&1
rm -rf $W/warm; tar czf $OUT/${TAR:-h.tgz} -C $W --exclude="*.pt" . 2>/dev/null
echo "[total] $(( $(date +%s) - T0 ))s"
