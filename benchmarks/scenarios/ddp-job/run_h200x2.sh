# How fixtures/jobs/h200x2-ddp was recorded: the device tool's nvidia-h200-x2 (2 H200s, one host),
# train_ddp.py copied to .carry-multigpu/. NVLink multicast stays off (the machine's rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi -L
set -o pipefail
timeout 400 torchrun --standalone --nproc_per_node=2 .carry-multigpu/train_ddp.py --out /tmp/ddp \
    --pack "$OUT" --batch 4 --work 300 --workers 6 2>&1 \
    | grep -v -e USDT -e UserWarning -e 'self.blocks' | tee "$OUT/log.txt"
