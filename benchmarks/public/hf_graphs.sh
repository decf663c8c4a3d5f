#!/bin/bash
# Issues #12/#13: `uncaptured-cuda-graph` on the compiled HF step: the compiled step as is and
# with the Trainer's --torch_compile_mode reduce-overhead (the fix the rule names).
bash "$(dirname "$0")/hf_compile_pair.sh" ro --torch_compile_mode reduce-overhead
