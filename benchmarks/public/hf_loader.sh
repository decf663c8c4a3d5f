#!/bin/bash
# Issue #13: `loader-jitter` on the compiled HF step says "Set TrainingArguments(
# dataloader_num_workers=15)" (the Trainer's default loads on the training thread; 16 cores
# recorded): the compiled step as is and with the Trainer's own --dataloader_num_workers 15.
bash "$(dirname "$0")/hf_compile_pair.sh" w15 --dataloader_num_workers 15
