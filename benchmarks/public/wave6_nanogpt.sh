#!/bin/bash
# Wave 6, first call: (a) what a CUDA graph replay costs the host, no profiler attached
# (benchmarks/graph_launch_cost.py; issue 35, GRAPH_LAUNCH_NS); (b) nanoGPT
# train_shakespeare_char.py, compile off, unmodified, under `advisor profile` (torch.profiler and
# --nsys; issue 33: get_batch is data preparation, no cpu-bound-loss) and under `--try` with every
# knob advisor can turn (issue 33: is the top fix the one that measures best; issue 36).
# From the repository root with .carry/, .whl/, .device-kit/.
source benchmarks/public/wave6_common.sh
source .device-kit/nsys-env.sh
python3 benchmarks/graph_launch_cost.py --json $W/logs/graph_launch.json > $W/logs/graph_launch.log 2>&1; cat $W/logs/graph_launch.log
cp -r .carry/nanogpt $W/ng && cd $W/ng
NG="train.py config/train_shakespeare_char.py --compile=False --log_interval=1 --eval_interval=100000 --eval_iters=1 --always_save_checkpoint=False"
run ng_torch 100 advisor profile --then stop --out $W/rep/ng_torch --json $W/rep/ng_torch.json --html $W/rep/ng_torch.html $NG --max_iters=3000
run ng_nsys 150 advisor profile --nsys --then stop --out $W/rep/ng_nsys --json $W/rep/ng_nsys.json $NG --max_iters=3000
run ng_try 330 advisor profile --try --try-runs 2 --try-steps 30 --try-time 12 --out $W/rep/ng_try --json $W/rep/ng_try.json --html $W/rep/ng_try.html $NG --max_iters=5000
for f in ng_torch ng_nsys ng_try; do echo "== $f"; grep -E "^ *[0-9]+\. |x\b|measured|estimated|loss|get_batch" $W/logs/$f.log | head -25; done
find $W/rep -name '*.sqlite' -size +14M -delete; find $W/rep -name '*.sqlite' -exec gzip -f {} \;
ship
