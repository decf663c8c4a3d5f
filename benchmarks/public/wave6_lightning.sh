#!/bin/bash
# Wave 6, second call (issue 36's missing hand pair; issue 33 item 5): Lightning's public ImageNet
# example (Lightning-AI/pytorch-lightning @ 7f0c343 examples/pytorch/domain_templates/imagenet.py,
# carried as .carry/lightning/imagenet.py, unmodified), torchvision ViT-B/16, batch 64, on
# synthesised JPEGs. By hand: 32-true (its default) against --trainer.precision bf16-mixed, two of
# each interleaved, no profiler, each timed from its own progress bar
# (benchmarks/public/lightning_steps.py); then `advisor profile --try bf16` on the 32-true job.
# From the repository root with .carry/, .whl/.
source benchmarks/public/wave6_common.sh
python3 benchmarks/public/synth_data.py images $W/imnet > $W/logs/synth.log 2>&1; echo "[synth] $(( $(date +%s) - T0 ))s"
mkdir -p $W/l && cp .carry/lightning/imagenet.py $W/l/ && cd $W/l
LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0"
for r in 1 2; do
  run l32_$r 90 python3 $LA --trainer.max_steps 243
  run lbf16_$r 90 python3 $LA --trainer.max_steps 243 --trainer.precision bf16-mixed
done
python3 $R/benchmarks/public/lightning_steps.py $W/logs/l32_*.log $W/logs/lbf16_*.log --json $W/logs/hand.json
run l_try 330 advisor profile --try bf16 --try-runs 2 --try-steps 25 --try-time 15 --out $W/rep/try --json $W/rep/try.json --html $W/rep/try.html $LA --trainer.max_steps 3000
grep -E "measured|estimated|fp32|autocast|bf16" $W/logs/l_try.log | head -20
ship
