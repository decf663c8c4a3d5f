#!/bin/bash
# Issue #12/#13: Lightning imagenet.py (torchvision ViT-B/16, batch 64) re-measured as the HF
# step was: advisor profile --nsys of 32-true and bf16-mixed, the steps timed by advisor's host
# clock outside the recorded window in the same process conditions, and each step's GPU time.
HARD=${HARD:-400}
source "$(dirname "$0")/device_common.sh"
python3 $C/scripts/synth_data.py images $W/imnet > $L/synth_images.log 2>&1
echo "[synth] $(( $(date +%s) - T0 ))s"
AP="advisor profile -q --wait 10 --steps 8 --then continue"
LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0 --trainer.max_steps 60"
cd $C/lightning
run lightning_bf16_nsys 140 $AP --nsys --out $W/traces/lightning_bf16_nsys --json $W/traces/lightning_bf16_nsys.json $LA --trainer.precision bf16-mixed
run lightning_fp32_nsys 160 $AP --nsys --out $W/traces/lightning_fp32_nsys --json $W/traces/lightning_fp32_nsys.json $LA --trainer.precision 32-true
(cd $W/traces && find . -name '*.sqlite' -exec gzip -f {} \; ; find . -name '*.nsys-rep' -delete
 tar -cf $OUT/traces.tar .)
tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT
