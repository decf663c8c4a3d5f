#!/usr/bin/env bash
# Lay out what one device call of benchmarks/unprofiled_check.py needs in a carry folder:
#   site/       advisor as an installed package (rules and templates inside it, entry points in a
#               dist-info) plus the nvtx wheel unpacked, for PYTHONPATH
#   benchmarks/ the benchmark scripts and scenarios; tests/capture/scripts/train_for.py and
#   tests/capture/step_clock_data.py (the scripts' log figures unprofiled_check.py imports)
#   ext/        public training scripts, copied from `fetch` mirrors (never committed):
#               ext/nanoGPT (karpathy/nanoGPT) and ext/timm (huggingface/pytorch-image-models,
#               train.py beside its own timm package, so the script runs with the timm it ships with)
# usage: benchmarks/device_carry.sh DEST NVTX_WHEEL NANOGPT_GIT_DIR TIMM_GIT_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dest=$1 whl=$2 nano=$3 timm=$4
rm -rf "$dest" && mkdir -p "$dest/site" "$dest/ext/nanoGPT/config" "$dest/ext/timm" \
  "$dest/tests/capture/scripts"
cp -r "$src/advisor" "$dest/site/advisor"
rm -rf "$dest/site/advisor/rules" && cp -r "$src/rules" "$dest/site/advisor/rules"
mkdir -p "$dest/site/advisor/report/templates" && cp -r "$src/reports/templates/." "$dest/site/advisor/report/templates/"
di="$dest/site/h100_advisor-0.1.0.dist-info" && mkdir -p "$di"
printf 'Metadata-Version: 2.1\nName: h100-advisor\nVersion: 0.1.0\n' > "$di/METADATA"
python3 - "$src/pyproject.toml" > "$di/entry_points.txt" <<'PY'
import sys, tomllib
eps = tomllib.load(open(sys.argv[1], "rb"))["project"]["entry-points"]
for group, items in eps.items():
    print(f"[{group}]")
    for k, v in items.items():
        print(f"{k} = {v}")
print("[console_scripts]\nadvisor = advisor.cli:run")
PY
(cd "$dest/site" && python3 -m zipfile -e "$whl" .)
cp -r "$src/benchmarks" "$dest/benchmarks"
cp "$src/tests/capture/scripts/train_for.py" "$dest/tests/capture/scripts/"
cp "$src/tests/capture/step_clock_data.py" "$dest/tests/capture/"  # unprofiled_check imports it
for f in train.py model.py configurator.py config/train_shakespeare_char.py; do
  git --git-dir="$nano" show "HEAD:$f" > "$dest/ext/nanoGPT/$f"; done
git --git-dir="$timm" show HEAD:train.py > "$dest/ext/timm/train.py"
git --git-dir="$timm" archive HEAD timm | tar -x -C "$dest/ext/timm"
find "$dest" -name __pycache__ -prune -exec rm -rf {} +
du -sh "$dest"
