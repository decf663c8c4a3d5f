#!/bin/bash
# Issue #12: the nsys shape probe (`advisor profile --nsys` runs the step before its window under
# emit_nvtx(record_shapes=True), advisor.graph.gemm_shapes). HF run_clm.py GPT-2 FP32 and
# Lightning imagenet.py ViT-B/16 FP32 under --nsys (traces for the fp32-matmul estimate from
# nsys with GEMM sizes), and nanoGPT plain / --nsys (the probe must leave the window's steps and
# the measured unprofiled step as they were). Carry .carry-transformer, .device-kit and a folder
# CARRY with ext/nanoGPT (see benchmarks/unprofiled_device_run.sh).
HARD=${HARD:-540}
source "$(dirname "$0")/device_common.sh"
CARRY=${CARRY:-$PWD/.carry-s4}; R=$PWD
python3 $C/scripts/synth_data.py text $W/txt > $L/synth_text.log 2>&1
echo "[synth] $(( $(date +%s) - T0 ))s"
AP="advisor profile -q --wait 6 --steps 8 --then continue"
HF="$C/hf/run_clm.py --model_type gpt2 --tokenizer_name $W/txt/tokenizer --train_file $W/txt/train.txt --do_train --output_dir $W/hfo --per_device_train_batch_size 8 --block_size 1024 --report_to none --save_strategy no --logging_steps 10 --preprocessing_num_workers 8 --max_steps 40"
cd $W
run hf_fp32_nsys 130 $AP --nsys --out $W/traces/hf_fp32_nsys --json $W/traces/hf_fp32_nsys.json $HF
cd $R
run nanogpt 170 python3 benchmarks/unprofiled_check.py collect --out $W/cal --ext $CARRY/ext --job-timeout 75 --part A --names nanogpt-plain,nanogpt-nsys --deadline 160
python3 $C/scripts/synth_data.py images $W/imnet > $L/synth_images.log 2>&1
LA="imagenet.py fit --model.data_path $W/imnet --model.arch vit_b_16 --model.batch_size 64 --model.workers 12 --trainer.limit_val_batches 0 --trainer.num_sanity_val_steps 0 --trainer.max_steps 40 --trainer.precision 32-true"
cd $C/lightning
run lightning_fp32_nsys 150 advisor profile -q --wait 10 --steps 8 --then continue --nsys --out $W/traces/lightning_fp32_nsys --json $W/traces/lightning_fp32_nsys.json $LA
rm -rf $W/cal/nanogpt-out
(cd $W/traces && find . -name '*.sqlite' -exec gzip -f {} \; ; find . -name '*.nsys-rep' -delete; cp -r $W/cal . ; tar -cf $OUT/traces.tar .)
tar -czf $OUT/logs.tgz -C $W logs; ls -la $OUT
