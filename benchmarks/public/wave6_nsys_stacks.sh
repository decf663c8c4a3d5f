#!/bin/bash
# Wave 6, fifth call (issue 33, nsys): nanoGPT train_shakespeare_char.py, compile off, under
# `advisor profile --nsys --stacks` (advisor samples the training thread's Python stacks beside
# the export): the line table names train.py:116 get_batch. Without --stacks an nsys capture has
# no Python frames (advisor's default under nsys, docs/profile.md). From the repository root
# with .carry/, .whl/, .device-kit/.
source benchmarks/public/wave6_common.sh
source .device-kit/nsys-env.sh
cp -r .carry/nanogpt $W/ng && cd $W/ng
run ng_nsys_stacks 120 advisor profile --nsys --stacks --then stop --out $W/rep/nss --json $W/rep/nss.json \
  train.py config/train_shakespeare_char.py --compile=False --log_interval=1 --eval_interval=100000 \
  --eval_iters=1 --always_save_checkpoint=False --max_iters=3000
grep -v "^iter" $W/logs/ng_nsys_stacks.log | sed -n '/^note: phase/,$p' | head -60
cp $W/logs/ng_nsys_stacks.log $W/rep/nss.json $OUT/
cp $W/rep/nss/pystacks_rank0.json.gz $W/rep/nss/capture_rank0.json $OUT/ 2>/dev/null; ls $OUT
