#!/usr/bin/env bash
# Install advisor the way users do, before the test suite runs (the suite itself uses an editable
# install, which once hid a wheel without advisor.ingest.kineto):
#   1. build the sdist and, from it, the wheel (python -m build), and check the wheel holds every
#      module and data file of the source tree (tests/install/wheel_files.py);
#   2. in a fresh virtual environment and a copy of the checkout, run the README's first command
#      exactly as README.md writes it (.ci/readme_command.py reads it from there);
#   3. install the built wheel (not editable) with its profile extra into another fresh virtual
#      environment, run `advisor profile` on a small CPU training script, then `advisor analyze`
#      on the folder it wrote.
# Any failing step fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
say() { echo ".ci/install_check: $*" >&2; }

say "building the sdist and the wheel"
python3 -m pip install -q build
python3 -m build -q --outdir "$WORK/dist" . >/dev/null
WHEEL=$(ls "$WORK"/dist/h100_advisor-*.whl)
python3 tests/install/wheel_files.py "$WHEEL" "$ROOT"

say "the README's first command, in a fresh virtual environment and a copy of the checkout"
python3 -m venv "$WORK/readme-venv"
mkdir "$WORK/checkout"
tar -C "$ROOT" --exclude=./.git -cf - . | tar -C "$WORK/checkout" -xf -
FIRST=$(python3 .ci/readme_command.py)
say "  $FIRST"
(cd "$WORK/checkout" && PATH="$WORK/readme-venv/bin:$PATH" VIRTUAL_ENV="$WORK/readme-venv" \
    bash -eo pipefail -c "$FIRST" >"$WORK/readme.out")
grep -q "Findings" "$WORK/readme.out"
test -s "$WORK/checkout/report.html"

say "the wheel in a fresh virtual environment: advisor profile, then advisor analyze of its folder"
python3 -m venv "$WORK/wheel-venv"
"$WORK/wheel-venv/bin/python" -m pip install -q torch==2.13.0
"$WORK/wheel-venv/bin/python" -m pip install -q "$WHEEL[profile]"
mkdir "$WORK/job"
(cd "$WORK/job" \
    && OMP_NUM_THREADS=1 "$WORK/wheel-venv/bin/advisor" profile -q --wait 5 "$ROOT/tests/capture/scripts/train_mlp.py" \
    && "$WORK/wheel-venv/bin/advisor" analyze -q --workers 1 --json job.json advisor-out/ \
    && "$WORK/wheel-venv/bin/python" -c "import json; assert json.load(open('job.json'))['job']['ranks'] == 1")
say "ok"
