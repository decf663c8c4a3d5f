#!/usr/bin/env bash
# Wave 11 (issue #35): why compile slowed unfused-attention's fixed steps (0.920x check, 0.93-0.96x
# fit, in one process: benchmarks/public/wave11_ab.sh). torch.profiler captures (harness.py
# torchprof: 10 steps, record_shapes) of each step eager and compiled, same cores as the timings:
#
#   run(kind="nvidia-h200", timeout_s=600, command="bash benchmarks/public/wave11_compiled_captures.sh")
#
# Returns <set>-unfused-attention-good-{none,compile}.json.gz; kept in
# fixtures/archive/public/wave11-2026-12-03/compiled/ and compared there by kernel.
set -u
export PYTHONUNBUFFERED=1
cd benchmarks/scenarios
for g in check fit; do for fix in none compile; do
  a=(); [ "$fix" = compile ] && a=(--fix compile)
  SCENARIO_SHAPE=$g timeout 150 taskset -c 8,9,10,11 python3 harness.py torchprof --scenario unfused-attention \
    --variant good "${a[@]}" --warmup 15 --out "/tmp/cap/$g-$fix" > "/tmp/cap-$g-$fix.log" 2>&1
  echo "[$g $fix] rc=$?"; tail -1 "/tmp/cap-$g-$fix.log"
  gzip -c "/tmp/cap/$g-$fix/trace.json" > "${OUT:-/tmp}/$g-unfused-attention-good-$fix.json.gz"
done; done
