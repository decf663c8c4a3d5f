#!/bin/bash
# Wave 7, issue 32's overhead targets with the host's drift held down: nanoGPT
# train_shakespeare_char.py, compile off (launch-bound), unmodified, plain against
# `advisor profile` with the hooks alone (no window) and with the default window (`--then
# continue`, the analysis beside the job), interleaved rounds (benchmarks/real_script_ab.py),
# iterations 100-599 of each run from the script's own log. Every process of every run is pinned
# to the same cores of the GPU's own NUMA node (`taskset`, from `nvidia-smi topo`): wave 6 ran
# unpinned and its plain runs alone spread from 12.0 to 18.1 ms (the scheduler moved the job
# across sockets and cores of different clocks), wider than the effect measured.
# From the repository root with .carry/, .whl/.
source benchmarks/public/wave6_common.sh
nvidia-smi topo -m > $W/logs/topo.txt 2>&1; lscpu > $W/logs/lscpu.txt 2>&1
# the GPU's CPU affinity ("0-15" or "0-7,16-23"): its first range, at most 8 cores, skipping core 0
AFF=$(awk '/^GPU0/ {for (i=1;i<=NF;i++) if ($i ~ /^[0-9]+-[0-9]+/) {print $i; exit}}' $W/logs/topo.txt)
LO=${AFF%%-*}; HI=${AFF#*-}; HI=${HI%%,*}; [ -n "$LO" ] || { LO=0; HI=$(( $(nproc) - 1 )); }
LO=$(( LO + 1 )); [ $(( HI - LO )) -gt 7 ] && HI=$(( LO + 7 )); CORES="$LO-$HI"
echo "GPU affinity '$AFF', runs pinned to cores $CORES" | tee $W/logs/cores.txt
cp -r .carry/nanogpt $W/ng && cd $W/ng
timeout $(( HARD - 30 )) taskset -c $CORES python3 "$R/benchmarks/real_script_ab.py" --warmup 1 \
  --pairs ${PAIRS:-6} --from-iter 100 \
  --variant "hooks=--wait 1000000 --then continue" --variant "window=--then continue" \
  -- train.py config/train_shakespeare_char.py --compile=False --max_iters=600 --log_interval=1 \
  --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False 2>&1 | tee $W/logs/ab_pinned.log | tail -32
mkdir -p $OUT/o && cp $W/logs/ab_pinned.log $W/logs/cores.txt $W/logs/topo.txt $W/logs/lscpu.txt $W/logs/gpu.csv $OUT/o/
echo "[total] $(( $(date +%s) - T0 ))s"
