# Sourced by the device scripts here (hf_hostcheck.sh, lightning_check.sh, hf_compile.sh,
# hf_graphs.sh, hf_loader.sh, probe_check.sh, loader_and_graphs.sh, hf_stack_check.sh),
# run from the repository root on the device with the carry folder .carry-transformer (whl/,
# hf/run_clm.py, lightning/imagenet.py, scripts/synth_data.py; see README.md).
# Sets C (carry), W (work), L (logs), T0; `run NAME TIMEOUT CMD...` runs CMD into $L/NAME.log,
# its timeout cut so that everything ends HARD seconds after T0 (what is not under $OUT then is
# lost); `hf_job` and `lightning_job` synthesise the inputs and set HF / LA, the public script and
# the arguments every run of it shares (each script adds its steps and the variant's flags);
# `ship_traces` gzips the nsys exports and drops the reports, `ship_logs` returns the logs.
# Installs the carried wheels and advisor (editable), offline Hugging Face settings.
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
profiled() {  # NAME TIMEOUT [profile options] CMD...: `run` of $AP, trace and JSON under traces/NAME
  local name=$1 to=$2; shift 2
  run "$name" "$to" $AP --out "$W/traces/$name" --json "$W/traces/$name.json" "$@"; }
hf_job() {  # HF run_clm.py, GPT-2 124M from scratch, batch 8 x 1024, on synthesised text
  python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
  echo "[synth text] $(( $(date +%s) - T0 ))s"
  HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8"; }
lightning_job() {  # Lightning imagenet.py, torchvision ViT-B/16, batch 64, on synthesised JPEGs
  python3 $C/scripts/synth_data.py images $W/imnet > $L/synth_images.log 2>&1
  echo "[synth images] $(( $(date +%s) - T0 ))s"
  LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0"; }
ship_traces() { (cd $W/traces && find . -name '*.sqlite' -exec gzip -f {} \; ; find . -name '*.nsys-rep' -delete); }
ship_logs() { tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT; }
