#!/usr/bin/env bash
# Wave 11 (issue #35): compile on the host-bound fixed steps whose separate-process timings
# settled nothing (waves 7, 8, 10), timed again with base and fix in ONE process, alternating
# blocks (`harness.py ab`: ABBA order, --blocks per side of --steps steps each). fit host-sync,
# whose separate-process timing settled (1.042x, 1.038-1.043x), is the control: the method must
# give it the same answer. From the repository root, on one GPU:
#
#   run(kind="nvidia-h200", timeout_s=600, command="bash benchmarks/public/wave11_ab.sh")
#
# Returns ab.tgz: per group <shape>-<scenario>/ab-{base,compile}-<k>.json (timing.json-shaped),
# logs/. tests/healthy_findings.py reads them as runs (`WAVE11`), unpacked under
# fixtures/archive/public/wave11-2026-12-03/ab/ with each file renamed
# <shape>-<scenario>-<kind>-<k>.json.
set -u
W=/tmp/ab; mkdir -p "$W/logs" "$W/warm" "${OUT:-/tmp}"; T0=$(date +%s); HARD=${HARD:-540}
export PYTHONUNBUFFERED=1
GROUPS_LIST=${GROUPS_LIST:-"fit:host-sync check:host-sync check:loader-jitter check:unfused-attention fit:unfused-attention"}
BLOCKS=${BLOCKS:-10}; STEPS=${STEPS:-30}; PIN=${PIN:-"taskset -c 8,9,10,11"}
cd benchmarks/scenarios
# fill Inductor's on-disk caches first, four compiles at a time (a timed process then loads them)
for g in $GROUPS_LIST; do shape=${g%%:*}; s=${g#*:}
  SCENARIO_SHAPE=$shape timeout 240 python3 harness.py timing --scenario "$s" --variant good --fix compile \
    --warmup 2 --steps 3 --out "$W/warm/$shape-$s" > "$W/logs/warm-$shape-$s.log" 2>&1 &
done; wait
echo "[warm done] $(( $(date +%s) - T0 ))s"
for g in $GROUPS_LIST; do shape=${g%%:*}; s=${g#*:}
  rem=$(( HARD - 20 - $(date +%s) + T0 )); [ $rem -ge 40 ] || { echo "SKIP (deadline): $shape $s"; continue; }
  t=$(date +%s)
  SCENARIO_SHAPE=$shape timeout $(( rem < 200 ? rem : 200 )) $PIN python3 harness.py ab --scenario "$s" \
    --variant good --fix compile --warmup 15 --steps "$STEPS" --blocks "$BLOCKS" --out "$W/$shape-$s" \
    > "$W/logs/$shape-$s.log" 2>&1
  echo "[$shape $s] rc=$? $(( $(date +%s) - t ))s"; grep '^\[ab\]' "$W/logs/$shape-$s.log" | tail -4
done
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$W/env.txt" 2>&1
echo "$PIN" > "$W/pin.txt"
rm -rf "$W/warm"; tar czf "${OUT:-/tmp}/ab.tgz" -C "$W" . 2>/dev/null
echo "[total] $(( $(date +%s) - T0 ))s"
