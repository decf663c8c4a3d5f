#!/bin/bash
# Wave 7, issue 35 item 3 (no allowlist): time compiler-fusion's fix on the healthy ("good")
# scenario steps where the rule raises a finding (tests/healthy_findings.py), without a profiler:
# `harness.py timing --variant good` against the same with `--fix compile` (torch.compile(model),
# the route the finding names), three processes each, alternating, one scenario finished before
# the next (most promised gain first), so a deadline cuts whole scenarios. Each run's timing.json
# comes back as <shape>-<scenario>-<base|compile>-<run>.json. From the repository root.
set -u
R=$PWD; W=/tmp/w7h; mkdir -p $W/logs $OUT/h; T0=$(date +%s); HARD=${HARD:-560}
export PYTHONUNBUFFERED=1
cd benchmarks/scenarios
one() { local shape=$1 s=$2 kind=$3 n=$4 rem=$(( HARD - 20 - $(date +%s) + T0 ))
  [ $rem -ge 45 ] || { echo "SKIP (deadline): $shape $s $kind $n"; return 1; }
  local fix=(); [ $kind = compile ] && fix=(--fix compile); local t=$(date +%s)
  SCENARIO_SHAPE=$shape timeout $(( rem < 150 ? rem : 150 )) python3 harness.py timing --scenario $s --variant good \
    "${fix[@]}" --warmup 15 --steps 50 --out $W/$shape-$s-$kind-$n > $W/logs/$shape-$s-$kind-$n.log 2>&1
  local rc=$?; cp $W/$shape-$s-$kind-$n/timing.json $OUT/h/$shape-$s-$kind-$n.json 2>/dev/null
  echo "[$shape $s $kind $n] rc=$rc $(( $(date +%s) - t ))s $(grep -o 'mean [0-9.]* ms' $W/logs/$shape-$s-$kind-$n.log)"; }
for pair in ${PAIRS_LIST:-fit:gemm-shape-alignment fit:fp32-matmul fit:pageable-memcpy fit:unfused-attention \
            check:gemm-shape-alignment check:fp32-matmul check:pageable-memcpy fit:host-sync \
            check:host-sync check:unfused-attention check:fp8-candidate fit:loader-jitter}; do
  shape=${pair%%:*}; s=${pair#*:}
  for n in 1 2 3; do one $shape $s base $n || break 2; one $shape $s compile $n || break 2; done
done
tar czf $OUT/h.tgz -C $W --exclude="*.pt" . 2>/dev/null; rm -f $OUT/h/*.json  # one archive: at most 8 files come back
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > $OUT/h/env.txt
echo "[total] $(( $(date +%s) - T0 ))s"
