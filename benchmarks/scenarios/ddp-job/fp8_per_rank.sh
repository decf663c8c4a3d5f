#!/usr/bin/env bash
# fp8-candidate's fix on the DDP job's per-rank step, one GPU, in one device call (issue #35):
#
#   run(kind="nvidia-h200", carry=[".whl"], timeout_s=600,
#       command="bash benchmarks/scenarios/ddp-job/fp8_per_rank.sh")
#
# .whl/ holds torchao's wheel (docs/validation.md, wave 8: torchao 0.17.0). Every shape (the
# job's two batch sizes; accumulation as its accum variants run it) x fix (eager, compile,
# fp8-compile), one process each, interleaved, ROUNDS times; the first round also records the
# kernels (--kernels). New runs stop at DEADLINE seconds. Everything comes back as one
# fp8-per-rank.tgz (a call returns at most 8 files); unpack it under fixtures/archive/public/
# and read it with tests/rules/test_fp8_unshaped.py's `runs` (wave 11: 26 files, of which only
# the 8 a first version returned one by one were kept, and its printed lines in logs/out.txt).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
HERE=$(dirname "$0")
W=/tmp/fp8-per-rank
ROUNDS=${ROUNDS:-3}
DEADLINE=${DEADLINE:-520}
SHAPES=${SHAPES:-"16:1 32:4"}
FIXES=${FIXES:-"eager compile fp8-compile"}
mkdir -p "$W/logs"
python3 -m pip install -q --no-index --no-deps .whl/torchao-*.whl > "$W/logs/pip.log" 2>&1 || tail -3 "$W/logs/pip.log"
nvidia-smi -L > "$W/env.txt" 2>&1
python3 -c "import torch, torchao; print(torch.__version__, torch.version.cuda, torchao.__version__)" >> "$W/env.txt" 2>&1
start=$SECONDS
for r in $(seq 1 "$ROUNDS"); do
  for shape in $SHAPES; do
    b=${shape%%:*}; a=${shape##*:}
    for fix in $FIXES; do
      if (( SECONDS - start > DEADLINE )); then echo "deadline: stopped before round $r b$b a$a $fix"; break 3; fi
      extra=(); [[ $r == 1 ]] && extra=(--kernels)
      python3 "$HERE/fp8_per_rank.py" --fix "$fix" --batch "$b" --accum "$a" "${extra[@]}" \
        --out "$W/b$b-a$a-$fix-$r.json" > "$W/logs/b$b-a$a-$fix-$r.log" 2>&1 \
        && tail -1 "$W/logs/b$b-a$a-$fix-$r.log" | tee -a "$W/logs/out.txt" || { echo "FAILED b$b a$a $fix $r"; tail -5 "$W/logs/b$b-a$a-$fix-$r.log"; }
    done
  done
done
echo "elapsed $((SECONDS - start)) s" | tee -a "$W/logs/out.txt"
tar czf "${OUT:-/tmp}/fp8-per-rank.tgz" -C /tmp fp8-per-rank
