"""What fp32-matmul's model keeps of each kernel class of an `advisor profile` report's kernel
table, kernel by kernel (no replay: host time and overlap are not in a report's table).

Written for timm's ResNet-50 `--try` on the H100 (issue #33), whose trace was not kept:

    python benchmarks/autocast_kernel_classes.py \
        fixtures/archive/public/wave4-2026-11-26/timm_try.result.json.xz

It prints, per class, kernels per step and ms per step before and after: TF32 convolutions and
GEMMs at the TF32 -> 16-bit ratio, FP32 ones at FP32 -> 16-bit, cuDNN's workspace and split-K
kernels kept, batch norm and the 16-bit ops at `AUTOCAST_KEEP`'s nominal keep, everything else
(copies, transposes, the optimizer) kept; and the casts autocast adds per step."""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    from advisor.rules.fp32_matmul import (
        AUTOCAST_KEEP,
        AUXILIARY,
        BATCH_NORM,
        CASTS_PER_GEMM_KERNEL,
    )

    from advisor.engine.gpus import lookup
    from advisor.graph.kernels import KernelCategory as K
    from advisor.graph.kernels import classify_name, gemm_precision

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="an advisor JSON report (.json or .json.xz)")
    ap.add_argument("--gpu", default="H100")
    args = ap.parse_args()
    raw = args.report.read_bytes()
    try:
        doc = json.loads(lzma.decompress(raw) if args.report.suffix == ".xz" else raw)
        rows = doc["kernels"]["all"]
    except (lzma.LZMAError, ValueError, KeyError, TypeError) as e:
        print(f"error: {args.report}: not an advisor report with a kernel table ({e})")
        return 2
    gpu = lookup(args.gpu)
    ms, kept, count = defaultdict(float), defaultdict(float), defaultdict(float)
    for r in rows:
        name, t, n = r["name"], r["ms_per_step"], r["count_per_step"]
        cat = classify_name(name)
        if cat in (K.GEMM, K.CONV):
            if AUXILIARY.search(name):
                key, keep = "conv/GEMM workspace, split-K", 1.0
            else:
                p = gemm_precision(name)
                ratio = {"tf32": gpu.tf32_to_16bit, "fp32": gpu.fp32_to_16bit}.get(p)
                key, keep = f"conv/GEMM {p}", 1 / ratio if ratio else 1.0
        elif cat is K.NORM and BATCH_NORM.search(name):
            key, keep = "batch norm", AUTOCAST_KEEP[K.ELEMENTWISE][0]
        elif cat in AUTOCAST_KEEP:
            key, keep = cat.value, AUTOCAST_KEEP[cat][0]
        else:
            key, keep = f"{cat.value} (kept)", 1.0
        ms[key] += t
        kept[key] += t * keep
        count[key] += n
    for k in sorted(ms, key=lambda k: -ms[k]):
        print(f"{k:32s} {count[k]:6.0f}/step {ms[k]:8.2f} ms -> {kept[k]:7.2f} ms")
    print(f"{'all kernels':32s} {sum(count.values()):6.0f}/step {sum(ms.values()):8.2f} ms -> "
          f"{sum(kept.values()):7.2f} ms")
    gemm = sum(count[k] for k in count if k.startswith("conv/GEMM ") and "workspace" not in k)
    print(f"autocast's casts: {CASTS_PER_GEMM_KERNEL * gemm:.0f} operators per step on the host")
    return 0


if __name__ == "__main__":
    sys.exit(main())
