#!/usr/bin/env bash
# The 2-GPU DDP validation in one device call (kind nvidia-h200-x2; any N GPUs: set NPROC).
#
#   rsync -a --delete --exclude .git --exclude fixtures --exclude tests /work/wt/jobs/ /work/main/.carry-jobs/
#   run(kind="nvidia-h200-x2", carry=[".carry-jobs", ".device-kit"], timeout_s=600,
#       command="bash .carry-jobs/benchmarks/scenarios/ddp-job/run_h200x2.sh")
#   python benchmarks/validate_job.py <files_at>      # here: unpacks, analyses, prints the tables
#
# 1. One torchrun runs every variant (baseline, slow-rank(+fixed), accum-sync/nosync, tiny-bucket):
#    each timed WITHOUT a profiler (mean step of --timed steps between two synchronizations; every
#    variant timed --repeats times in turn, the median kept: these hosts drift between runs), then
#    traced with torch.profiler, one trace per rank.
# 2. One torchrun per variant under `nsys profile` (the steps as NVTX ranges; no timing), exported
#    to SQLite: one report holding every rank's process.
# 3. Everything in one gzipped tar, split into 15 MB parts (the device returns at most 8 files).
# NVLink multicast stays off (the machine's rule). Nothing here needs advisor on the device.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NPROC=${NPROC:-2}
HERE=$(dirname "$0")
SCRIPT=$HERE/train_ddp.py
W=/tmp/ddp-validation
VARIANTS=${VARIANTS:-baseline,slow-rank,slow-rank-fixed,accum-sync,accum-nosync,tiny-bucket}
DEVICE=${DEVICE:-cuda}  # cpu: the same script on gloo (the CPU check of its logic)
read -ra SIZE <<< "${SIZE_ARGS:---batch 16 --work 300 --workers 6 --repeats 3}"
rm -rf "$W" && mkdir -p "$W/torch" "$W/nsys"
{ nvidia-smi -L 2>/dev/null || echo "no GPU: --device $DEVICE"; } | tee "$W/log.txt"
quiet() { grep -v -e USDT -e UserWarning -e 'self.blocks'; }

echo "== timed unprofiled + torch.profiler ==" | tee -a "$W/log.txt"
timeout "${TORCH_TIMEOUT:-380}" torchrun --standalone --nproc_per_node="$NPROC" "$SCRIPT" --out "$W/torch" \
    --device "$DEVICE" --variants "$VARIANTS" "${SIZE[@]}" 2>&1 | quiet | tee -a "$W/log.txt"
cp "$W/torch/measured.json" "$W/measured.json" 2>/dev/null

echo "== nsys ==" | tee -a "$W/log.txt"
if [ -f .device-kit/nsys-env.sh ]; then
    # shellcheck disable=SC1091
    source .device-kit/nsys-env.sh
    for v in ${VARIANTS//,/ }; do
        if [ "$SECONDS" -gt 480 ]; then  # keep inside the device's 600 s per call
            echo "nsys: out of time before $v" | tee -a "$W/log.txt"; break
        fi
        timeout 70 nsys profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -f true \
            -o "$W/nsys/$v" torchrun --standalone --nproc_per_node="$NPROC" "$SCRIPT" \
            --out "$W/nsys-run" --device "$DEVICE" --variants "$v" --capture nsys --warmup 5 \
            "${SIZE[@]}" --timed 0 --repeats 1 \
            2>&1 | quiet | tail -3 | tee -a "$W/log.txt"
        nsys export --type sqlite -f true -o "$W/nsys/$v.sqlite" "$W/nsys/$v.nsys-rep" >/dev/null 2>&1 \
            || echo "nsys export of $v failed" | tee -a "$W/log.txt"
        rm -f "$W/nsys/$v.nsys-rep"
    done
else
    echo "no .device-kit/nsys-env.sh: carry .device-kit for the nsys captures" | tee -a "$W/log.txt"
fi

ls -la "$W"/torch/* "$W"/nsys | tee -a "$W/log.txt"
tar czf - -C "$W" measured.json log.txt torch nsys | split -b 15M -d - "$OUT/ddp-validation.tgz.part-"
ls -la "$OUT"
