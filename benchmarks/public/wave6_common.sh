# Sourced by the wave-6 device scripts (wave6_nanogpt.sh, wave6_lightning.sh, wave6_overhead.sh),
# run from the repository root on the device with .carry/ (dist/ the built wheel, nanogpt/ with
# its shakespeare_char data prepared here, lightning/imagenet.py) and .whl/ (advisor's
# dependencies the image lacks, and LightningCLI's). Installs advisor as users do (the wheel,
# pip), sets W (work), T0, and `run NAME TIMEOUT CMD...` (CMD into $W/logs/NAME.log, its timeout
# cut so everything ends HARD seconds after T0; what is not under $OUT then is lost).
set -u
R=$PWD; W=/tmp/w6; mkdir -p $W/logs $W/rep; T0=$(date +%s); HARD=${HARD:-560}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --find-links .whl ".carry/dist/h100_advisor-0.1.0-py3-none-any.whl[profile]" \
  jsonargparse docstring-parser typeshed-client importlib-resources > $W/logs/pip.log 2>&1 || { tail -5 $W/logs/pip.log; exit 1; }
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 25 - $(date +%s) + T0 ))
  [ $rem -ge 20 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t=$(date +%s); timeout $to "$@" > $W/logs/$name.log 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s (at $(( $(date +%s) - T0 ))s)"; }
ship() { find $W/rep -name '*.nsys-rep' -delete; find $W/rep -name scratch -type d -prune -exec rm -rf {} +
  tar -czf $W/all.tgz -C $W logs rep 2>/dev/null; split -b 15m $W/all.tgz $OUT/all.tgz.part-
  ls -la $OUT; echo "[total] $(( $(date +%s) - T0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > $W/logs/gpu.csv 2>&1
