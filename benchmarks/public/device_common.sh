# Sourced by the second-pass device scripts (hf_hostcheck.sh, lightning_check.sh, hf_compile.sh),
# run from the repository root on the device with the carry folder .carry-transformer (whl/,
# hf/run_clm.py, lightning/imagenet.py, scripts/synth_data.py; see README.md).
# Sets C (carry), W (work), L (logs), T0; `run NAME TIMEOUT CMD...` runs CMD into $L/NAME.log,
# its timeout cut so that everything ends HARD seconds after T0 (what is not under $OUT then is
# lost); installs the carried wheels and advisor (editable), offline Hugging Face settings.
set -u
C=$PWD/.carry-transformer; W=/tmp/w; L=$W/logs; mkdir -p "$L" "$W/traces"
T0=$(date +%s); HARD=${HARD:-400}
run() { local name=$1 to=$2; shift 2; local rem=$(( HARD - 20 - $(date +%s) + T0 ))
  [ $rem -ge 30 ] || { echo "SKIP (deadline): $name"; return 0; }; [ "$to" -le $rem ] || to=$rem
  local t; t=$(date +%s); timeout "$to" "$@" > "$L/$name.log" 2>&1
  echo "[$name] rc=$? $(( $(date +%s) - t ))s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$C"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 HF_HOME=$W/hf HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$L/pip.log" 2>&1 || { tail "$L/pip.log"; exit 1; }
[ -f .device-kit/nsys-env.sh ] && source .device-kit/nsys-env.sh
