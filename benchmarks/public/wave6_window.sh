#!/bin/bash
# Wave 6, fourth call (issue 32): does the job run slower after advisor's torch.profiler window
# than before it, and than without advisor? nanoGPT train_shakespeare_char.py, compile off
# (launch-bound), 500 iterations, each from its own log: plain; the hooks alone (no window);
# the default window with the analysis at the job's end (nothing of advisor's beside the job);
# the same with Kineto's CUPTI kept subscribed (TEARDOWN_CUPTI=0). Two interleaved rounds.
# benchmarks/public/iter_phases.py prints each run's mean iteration before the window (5-15),
# just after it (30-99) and later (100-499). From the repository root with .carry/, .whl/.
source benchmarks/public/wave6_common.sh
cp -r .carry/nanogpt $W/ngw && cd $W/ngw
NG="train.py config/train_shakespeare_char.py --compile=False --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False --max_iters=500"
for r in 1 2; do
  run w_plain_$r 60 python3 $NG
  run w_window_$r 120 env ADVISOR_ANALYSIS_AT_END=1 advisor profile --then continue --out $W/rep/w_window_$r $NG
  run w_cupti_$r 120 env ADVISOR_ANALYSIS_AT_END=1 TEARDOWN_CUPTI=0 advisor profile --then continue --out $W/rep/w_cupti_$r $NG
  run w_hooks_$r 60 advisor profile --wait 1000000 --then continue --out $W/rep/w_hooks_$r $NG
done
python3 $R/benchmarks/public/iter_phases.py $W/logs/w_*.log | tee $W/logs/w_table.txt
mkdir -p $OUT/w && cp $W/logs/w_* $OUT/w/; for d in $W/rep/w_*; do cp $d/capture_rank0.json $OUT/w/$(basename $d).capture.json 2>/dev/null; done
ls $OUT/w | wc -l; echo "[total] $(( $(date +%s) - T0 ))s"
