"""Step times from the public scripts' own logs (no profiler), as JSON on stdout.

    python3 parse_logs.py DIR     # every *.log in DIR

nanoGPT   ``iter N: loss L, time T ms``: median over iterations >= 10 (the first ones compile,
          warm up cuBLAS and the allocator).
timm      ``benchmark.py``: ``Train benchmark of ... : ... samples/sec, T ms/step`` (its own
          timed loop after its warm-up iterations).
HF        run_clm.py's Trainer metrics ``{'train_runtime': 'T', 'train_samples_per_second': ...}``:
          two runs of N1 and N2 steps give the per-step time (T2 - T1) / (N2 - N1), which cancels
          the start-up and warm-up both share.
Lightning the progress bar's final ``N/total [elapsed<..., R it/s]`` (tqdm with smoothing 0:
          N / elapsed since the epoch began); two runs of N1 and N2 steps give the per-step time
          (N2/R2 - N1/R1) / (N2 - N1), which cancels the start-up and warm-up both share.
"""

import glob
import json
import os
import re
import statistics
import sys


def nanogpt(text):
    ts = [(int(m.group(1)), float(m.group(2)))
          for m in re.finditer(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", text)]
    xs = [t for i, t in ts if i >= 10]
    return {"step_ms": statistics.median(xs), "n": len(xs)} if xs else None


def timm(text):
    m = re.findall(r"Train benchmark of .*?([\d.]+) samples/sec, ([\d.]+) ms/(?:step|sample)", text)
    return {"step_ms": float(m[-1][1]), "samples_per_s": float(m[-1][0])} if m else None


def hf_runtime(text):
    m = re.findall(r"'train_runtime': '?([\d.]+)'?, 'train_samples_per_second': '?([\d.]+)", text)
    return {"train_runtime_s": float(m[-1][0]), "train_samples_per_second": float(m[-1][1])} if m else None


def lightning_elapsed(text, n):
    best = None
    for m in re.finditer(r"(\d+)/(\d+) \[[\d:]+<[\d:?]+,\s+([\d.]+)(it/s|s/it)", text.replace("\r", "\n")):
        if int(m.group(1)) == n:
            r = float(m.group(3))
            best = n / r if m.group(4) == "it/s" else n * r
    return best


def main(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.log"))):
        name = os.path.basename(f)[:-4]
        with open(f, errors="replace") as fh:
            text = fh.read()
        if name.startswith("nanogpt"):
            out[name] = nanogpt(text)
        elif name.startswith("timm"):
            out[name] = timm(text)
        elif name.startswith("hf_") and re.search(r"_n\d+$", name):
            r = hf_runtime(text)
            out[name] = dict(r, steps=int(name.rsplit("_n", 1)[1])) if r else None
        elif name.startswith("lightning"):
            m = re.search(r"_n(\d+)$", name)
            if m:
                out[name] = {"elapsed_s": lightning_elapsed(text, int(m.group(1))), "steps": int(m.group(1))}
    # Lightning per-step time from each pair of runs
    for k in [k for k in out if k.startswith("lightning") and k.endswith("_n20")]:
        a, b = out.get(k), out.get(k[:-4] + "_n70")
        if a and b and a["elapsed_s"] and b["elapsed_s"]:
            out[k[:-4]] = {"step_ms": (b["elapsed_s"] - a["elapsed_s"]) / (70 - 20) * 1e3}
    for k in [k for k in out if k.startswith("hf_") and k.endswith("_n10")]:
        a, b = out.get(k), out.get(k[:-4] + "_n40")
        if a and b:
            out[k[:-4]] = {"step_ms": (b["train_runtime_s"] - a["train_runtime_s"]) / (40 - 10) * 1e3}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
