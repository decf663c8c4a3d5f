"""The step time users see vs what advisor reports: measured, and predicted from nsys and
torch.profiler traces, on launch-bound, GPU-bound and loader-bound training.

Two halves. ``collect`` runs on the H100 (device tool): for each workload the script's own
step time without advisor (from its own log), then `advisor profile` (torch.profiler window) and
`advisor profile --nsys`, keeping their JSON results and traces; plus the profiler-calibration
captures (`profiler_calibration.py`), plus runs that time `advisor profile`'s hooks with no window
(``--wait 100000``) against plain runs. ``fit`` and ``table`` run anywhere (no GPU, no torch):
``fit`` fits the per-call and per-operator profiler costs on the calibration captures only;
``table`` re-analyses every workload trace as a bare trace (`advisor analyze`) and prints, per
workload, the script's figure, advisor's measured unprofiled step, and the unprofiled step
predicted from the nsys and the torch.profiler trace, each with its error.

    python benchmarks/unprofiled_check.py collect --out /tmp/res --part A   # on the H100
    python benchmarks/unprofiled_check.py fit RESULTS_DIR
    python benchmarks/unprofiled_check.py table RESULTS_DIR [RESULTS_DIR ...]

Public scripts run unmodified, configured only through their own command lines: karpathy/nanoGPT
``train.py config/train_shakespeare_char.py --compile=False`` (launch-bound: hundreds of short
kernels per iteration; token files synthesised with numpy) and timm's ``train.py`` (resnet18 fed
by a 2-worker DataLoader over synthesised JPEGs: loader-bound), found under ``--ext DIR``
(``DIR/nanoGPT``, ``DIR/timm``; fetched, never committed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NSYS_FLAGS = ["-t", "cuda,nvtx,osrt,cublas,cudnn", "--sample=none", "--cpuctxsw=none",
              "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-f", "true"]
NSYS_CONFIGS = {"nsys": NSYS_FLAGS, "nsys-lean": ["-t", "cuda,nvtx", *NSYS_FLAGS[2:]]}
"""The nsys configurations calibrated: advisor's trace set, and CUDA and NVTX only.
(``--python-backtrace=cuda`` recorded no backtraces on the H100 machine: nsys takes them with
its CPU sampler, which that machine's kernel does not support.)"""
PROFILE_CONFIGS = {"kineto": [], "kineto-nostack": ["--no-stacks"], "nsys": ["--nsys"],
                   "nsys-lean": ["--nsys", "--nsys-trace", "cuda,nvtx"]}
"""`advisor profile` options per configuration, for the framework workloads: the unprofiled
steps it measures outside its window are the plain figure each capture is fitted against."""
FRAMEWORK_SCRIPTS = {"fw-hf": ("benchmarks/frameworks/hf_trainer_tiny.py", ["--steps", "400"]),
                     "fw-lightning": ("benchmarks/frameworks/lightning_tiny.py",
                                      ["--steps", "400"])}
TOLERANCE = 0.10


# ----- the scripts' own figures ------------------------------------------------------------------


sys.path.insert(0, str(ROOT))
from tests.archive import stored  # noqa: E402
from tests.capture.step_clock_data import (  # noqa: E402
    NANOGPT_ITER,
    TIMM_TRAIN,
    _fig,
    _script_figure,
    _window,
    fit_overheads,
)


def nanogpt_figure(log: str, skip: int = 10) -> dict | None:
    ms = [float(t) for i, t in NANOGPT_ITER.findall(log) if int(i) >= skip]
    return _fig(ms)


def timm_figure(log: str) -> dict | None:
    ms = [float(t) * 1e3 for _, idx, t in TIMM_TRAIN.findall(log) if int(idx) >= 2]
    return _fig(ms)


# ----- collect (on the GPU machine) --------------------------------------------------------------


def _py() -> list[str]:
    return [sys.executable]


def _advisor() -> list[str]:
    return [sys.executable, "-m", "advisor.cli"]


def _run(cmd: list[str], cwd: Path, log: Path, timeout: float) -> int:
    t0 = time.time()
    with log.open("w") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            rc = subprocess.call(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = 124
        f.write(f"\n[rc {rc}, {time.time() - t0:.1f} s]\n")
    return rc


def _gzip(path: Path) -> Path | None:
    if not path.exists():
        return None
    gz = path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    path.unlink()
    return gz


def make_nanogpt_data(root: Path, tiny: bool) -> None:
    import pickle

    import numpy as np

    d = root / "data" / "shakespeare_char"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    # character-level "text": a Markov chain over 65 symbols, so the loss can fall
    n = 100_000 if tiny else 300_000
    trans = rng.dirichlet(np.full(65, 0.3), size=65)
    seq = np.empty(n, dtype=np.uint16)
    seq[0] = 0
    u = rng.random(n)
    cdf = trans.cumsum(1)
    for i in range(1, n):
        seq[i] = min(64, int(np.searchsorted(cdf[seq[i - 1]], u[i])))
    split = int(0.9 * n)
    seq[:split].tofile(d / "train.bin")
    seq[split:].tofile(d / "val.bin")
    chars = [chr(32 + i) for i in range(65)]
    with (d / "meta.pkl").open("wb") as f:
        pickle.dump({"vocab_size": 65, "itos": dict(enumerate(chars)),
                     "stoi": {c: i for i, c in enumerate(chars)}}, f)


def make_images(root: Path, tiny: bool, per_class: int = 80) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    classes, per, size = (4, 24, 64) if tiny else (16, per_class, 128)
    for split, n in (("train", per), ("validation", max(4, per // 5))):
        for c in range(classes):
            d = root / split / f"c{c:02d}"
            d.mkdir(parents=True, exist_ok=True)
            for k in range(n):
                small = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
                img = Image.fromarray(small).resize((size, size), Image.BILINEAR)
                img.save(d / f"{k:04d}.jpg", quality=90)


def jobs(part: str, ext: Path, work: Path, tiny: bool, cuda: bool) -> list[dict]:
    """(name, kind, cwd, command) of each run, in order; a run's files go to work/name."""
    out: list[dict] = []
    cal = [*_py(), str(HERE / "profiler_calibration.py")]
    tiny_flag = ["--tiny"] if tiny else []
    nano = ext / "nanoGPT"
    nano_args = ["train.py", "config/train_shakespeare_char.py", "--compile=False",
                 "--log_interval=1", "--eval_interval=100", "--eval_iters=20",
                 f"--max_iters={60 if tiny else 400}", f"--out_dir={work / 'nanogpt-out'}"]
    if tiny:
        nano_args += ["--device=cpu", "--n_layer=2", "--n_embd=64", "--n_head=2",
                      "--block_size=32", "--batch_size=4", "--dtype=float32"]
    timm = ext / "timm"
    # one epoch (timm's --epoch-repeats applies to iterable datasets only, not ImageFolder);
    # timm-long runs it over --per-class images at batch 16: issue 20's job whose epoch
    # outlasts the analysis
    timm_args = ["train.py", "--data-dir", str(work / "images"), "--model", "resnet18",
                 "-b", "16" if tiny else "32", "--epochs", "1", "-j", "2",
                 "--img-size", "32" if tiny else "128",
                 "--log-interval", "1", "--checkpoint-hist", "1", "--warmup-epochs", "0",
                 "--output", str(work / "timm-out")]
    if tiny:
        timm_args += ["--device", "cpu", "--no-prefetcher"]
    prof = ["profile", "-q", "--steps", "8", "--then", "continue"]
    if part == "C":
        out.append({"name": "cal-plain", "kind": "cal", "cmd": [*cal, "--mode", "plain",
                                                                  *tiny_flag]})
        for mode in ("kineto", "kineto-stack"):
            out.append({"name": f"cal-{mode}", "kind": "cal",
                        "cmd": [*cal, "--mode", mode, *tiny_flag]})
        if cuda:
            for tag, flags in NSYS_CONFIGS.items():
                for w in ("chain", "views", "mlp"):
                    out.append({"name": f"cal-{tag}-{w}", "kind": "cal-nsys", "flags": flags,
                                "cmd": [*cal, "--mode", "nsys", "--workload", w]})
        for fw, (script, args) in FRAMEWORK_SCRIPTS.items():
            for tag, extra in PROFILE_CONFIGS.items():
                if tag.startswith("nsys") and not cuda:
                    continue
                out.append({"name": f"{fw}-{tag}", "kind": "framework", "cwd": work,
                            "cmd": [*_advisor(), *prof, *extra, "--out", "{dir}", "--json",
                                    "{dir}/advisor.json", str(ROOT / script), *args]})
    if part == "A":
        out.append({"name": "cal-plain", "kind": "cal", "cmd": [*cal, "--mode", "plain",
                                                                  *tiny_flag]})
        out.append({"name": "cal-kineto", "kind": "cal", "cmd": [*cal, "--mode", "kineto",
                                                                   *tiny_flag]})
        out.append({"name": "cal-kineto-stack", "kind": "cal",
                    "cmd": [*cal, "--mode", "kineto-stack", *tiny_flag]})
        if cuda:
            for tag, flags in NSYS_CONFIGS.items():
                for w in ("chain", "views", "mlp"):
                    out.append({"name": f"cal-{tag}-{w}", "kind": "cal-nsys", "flags": flags,
                                "cmd": [*cal, "--mode", "nsys", "--workload", w]})
        out.append({"name": "nanogpt-plain", "kind": "nanogpt", "cwd": nano,
                    "cmd": [*_py(), *nano_args]})
        out.append({"name": "nanogpt-hooks", "kind": "nanogpt", "cwd": nano,
                    "cmd": [*_advisor(), "profile", "-q", "--wait", "100000", "--out", "{dir}",
                            *nano_args]})
        out.append({"name": "nanogpt-plain2", "kind": "nanogpt", "cwd": nano,
                    "cmd": [*_py(), *nano_args]})
        out.append({"name": "nanogpt-hooks2", "kind": "nanogpt", "cwd": nano,
                    "cmd": [*_advisor(), "profile", "-q", "--wait", "100000", "--out", "{dir}",
                            *nano_args]})
        out.append({"name": "nanogpt-kineto", "kind": "nanogpt", "cwd": nano,
                    "cmd": [*_advisor(), *prof, "--out", "{dir}", "--json", "{dir}/advisor.json",
                            *nano_args]})
        if cuda:
            for tag in ("nsys", "nsys-lean"):
                out.append({"name": f"nanogpt-{tag}", "kind": "nanogpt", "cwd": nano,
                            "cmd": [*_advisor(), *prof, *PROFILE_CONFIGS[tag], "--out", "{dir}",
                                    "--json", "{dir}/advisor.json", *nano_args]})
    if part == "B":
        out.append({"name": "timm-long", "kind": "timm", "cwd": timm,
                    "cmd": [*_advisor(), *prof, "--out", "{dir}", "--json", "{dir}/advisor.json",
                            *[{"32": "16"}.get(x, x) for x in timm_args]]})
        out.append({"name": "timm-long-plain", "kind": "timm", "cwd": timm,
                    "cmd": [*_py(), *[{"32": "16"}.get(x, x) for x in timm_args]]})
        for wl in ("timm",):
            out.append({"name": f"{wl}-plain", "kind": wl, "cwd": timm,
                        "cmd": [*_py(), *timm_args]})
            out.append({"name": f"{wl}-kineto", "kind": wl, "cwd": timm,
                        "cmd": [*_advisor(), *prof, "--out", "{dir}", "--json",
                                "{dir}/advisor.json", *timm_args]})
            if cuda:
                out.append({"name": f"{wl}-nsys", "kind": wl, "cwd": timm,
                            "cmd": [*_advisor(), *prof, *PROFILE_CONFIGS["nsys"], "--out",
                                    "{dir}", "--json", "{dir}/advisor.json", *timm_args]})
        out.append({"name": "hook-cost", "kind": "bench",
                    "cmd": [*_py(), str(HERE / "hook_cost.py"), "--blocks", "12", "--steps", "50"]})
        if cuda:
            for sc in ("uncaptured-cuda-graph", "unfused-attention", "cpu-bound-loss", "host-sync",
                       "compiler-fusion"):
                script = HERE / "scenarios" / sc / "scenario.py"
                out.append({"name": f"{sc}-plain", "kind": "scenario", "cwd": work,
                            "cmd": [*_py(), str(HERE / "scenarios" / "harness.py"), "timing",
                                    "--scenario", sc, "--variant", "bad", "--out", "{dir}"]})
                for tag, extra in (("kineto", []), ("nsys", PROFILE_CONFIGS["nsys"])):
                    out.append({"name": f"{sc}-{tag}", "kind": "scenario", "cwd": work,
                                "cmd": [*_advisor(), *prof, *extra, "--out", "{dir}", "--json",
                                        "{dir}/advisor.json", str(script), "--variant", "bad",
                                        "--steps", "100"]})
    return out


ORDER = ("nanogpt-plain", "nanogpt-kineto", "nanogpt-nsys", "timm-", "unfused-attention-",
         "uncaptured-cuda-graph-", "hook-cost", "cal-plain", "cal-kineto", "cal-nsys-",
         "cal-kineto-stack", "cal-nsys-lean-", "nanogpt-hooks", "nanogpt-plain2",
         "nanogpt-hooks2", "timm-long", "timm-long-plain")
"""Run order of ``--part all`` (one device call): what the table needs first, so a deadline
cuts the least needed runs."""


def ordered(all_jobs: list[dict]) -> list[dict]:
    def rank(job: dict) -> int:
        hits = [i for i, p in enumerate(ORDER)
                if job["name"] == p or (p.endswith("-") and job["name"].startswith(p))]
        return max(hits) if hits else len(ORDER)
    return sorted(all_jobs, key=rank)


def collect(a: argparse.Namespace) -> int:
    import torch

    cuda = torch.cuda.is_available()
    work = a.out
    work.mkdir(parents=True, exist_ok=True)
    env_note = {"gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
                "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                   time.gmtime())}
    if a.part in ("A", "all"):
        make_nanogpt_data(a.ext / "nanoGPT", a.tiny)
    if a.part in ("B", "all"):
        make_images(work / "images", a.tiny, a.per_class)
    t_start = time.time()
    index = []
    nsys = shutil.which("nsys")
    todo = jobs(a.part, a.ext, work, a.tiny, cuda) if a.part != "all" else ordered(
        jobs("A", a.ext, work, a.tiny, cuda) + jobs("B", a.ext, work, a.tiny, cuda))
    if a.names:
        todo = [j for j in todo if any(j["name"] == n[:-1] if n.endswith("$")
                                       else j["name"].startswith(n) for n in a.names.split(","))]
    for job in todo:
        if time.time() - t_start > a.deadline:
            index.append({"name": job["name"], "skipped": "deadline"})
            continue
        d = work / job["name"]
        d.mkdir(exist_ok=True)
        cmd = [c.replace("{dir}", str(d)) for c in job["cmd"]]
        cwd = job.get("cwd", work)  # not the repo root: the installed advisor is imported
        if job["kind"] == "cal-nsys":
            if nsys is None:
                index.append({"name": job["name"], "skipped": "no nsys"})
                continue
            cmd = [nsys, "profile", *job["flags"], "-o", str(d / "nsys"), *cmd, "--out", str(d)]
        elif job["kind"] == "cal":
            cmd = [*cmd, "--out", str(d)]
        t0 = time.time()
        rc = _run(cmd, Path(cwd), d / "log.txt", timeout=a.job_timeout)
        entry = {"name": job["name"], "kind": job["kind"], "rc": rc,
                 "seconds": round(time.time() - t0, 1), "start_unix": t0, "end_unix": time.time()}
        if job["kind"] == "cal-nsys" and (d / "nsys.nsys-rep").exists():
            subprocess.call([nsys, "export", "--type", "sqlite", "-o", str(d / "nsys.sqlite"),
                             "-f", "true", str(d / "nsys.nsys-rep")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
            (d / "nsys.nsys-rep").unlink(missing_ok=True)
        for p in list(d.glob("*.sqlite")):
            _gzip(p)
        for p in list(d.glob("*.nsys-rep")):
            p.unlink()
        index.append(entry)
        print(json.dumps(entry), flush=True)
        (work / f"index-{a.part}-{int(t_start)}.json").write_text(json.dumps({"env": env_note, "jobs": index},
                                                              indent=1))
    for junk in ("nanogpt-out", "timm-out", "images"):
        shutil.rmtree(work / junk, ignore_errors=True)
    return 0


# ----- fit and table (anywhere) ------------------------------------------------------------------


def _analysis(trace: Path):
    """The analysis of a kept trace (one in fixtures/archive is unpacked first: stored as .xz)."""
    from advisor.analysis import analyze
    from tests.archive import readable

    return analyze(readable(trace))


def _counts(an) -> dict[str, float]:
    """Per analysed step: the program's CUDA calls, launches, traced framework operators."""
    from advisor.engine.context import analysed_steps
    from advisor.engine.profiler_cost import per_step_counts

    return per_step_counts(an.graph, analysed_steps(an.graph))


def calibration_rows(dirs: list[Path]) -> list[dict]:
    """Each calibration capture with its plain median, traced replay and event counts."""
    from advisor.engine.profiler_cost import NO_CALIBRATION
    from advisor.engine.profiler_fit import replay_median_ns

    rows = []
    for root in dirs:
        plain_p = root / "cal-plain" / "plain.json"
        if not plain_p.exists():
            continue
        plain = json.loads(plain_p.read_text())["results"]
        traces = []
        for mode in ("kineto", "kineto-stack"):
            for w in plain:
                traces.append((mode, w, root / f"cal-{mode}" / f"{w}-{mode}.json.gz"))
        for tag in NSYS_CONFIGS:
            for w in plain:
                traces.append((tag, w, root / f"cal-{tag}-{w}" / "nsys.sqlite.gz"))
        for mode, w, trace in traces:
            if not trace.exists():
                continue
            an = _analysis(trace)
            rows.append({"mode": mode, "workload": w, "plain_ms": plain[w]["median_ms"],
                         "traced_ms": an.summary.median_step_ns / 1e6,
                         "raw_replay_ms": replay_median_ns(an.graph, NO_CALIBRATION) / 1e6,
                         "predicted_ms": (an.results.replay.unprofiled_median_ns or 0) / 1e6,
                         "calibration": an.results.replay.calibration, **_counts(an)})
    return rows


def fit(a: argparse.Namespace) -> int:
    """Least squares (non-negative) of (raw replay - plain) over per-step event counts, from the
    captures in ``dirs`` or from rows saved by an earlier run (``--rows``)."""
    rows = json.loads(a.rows.read_text())["rows"] if a.rows else calibration_rows(a.dirs)
    for mode, (cols, coef) in fit_overheads(rows).items():
        rs = [r for r in rows if r["mode"] == mode]
        print(f"{mode}: " + ", ".join(f"{c} {v:.0f} ns" for c, v in zip(cols, coef, strict=True)))
        for r in rs:
            pred = sum(r[c] * v for c, v in zip(cols, coef, strict=True))
            print(f"   {r['workload']:12} plain {r['plain_ms']:8.3f}  traced {r['traced_ms']:8.3f}  "
                  f"raw replay {r['raw_replay_ms']:8.3f}  fit {r['raw_replay_ms'] - pred / 1e6:8.3f}"
                  f"  now {r['predicted_ms']:8.3f}  calls {r['calls']:6.0f}  ops {r['ops']:6.0f}")
    return 0


def table(a: argparse.Namespace) -> int:
    """Per workload: the script's own figure without advisor, the same script's own figure in
    the run under advisor (outside the window), advisor's measured unprofiled step, and the
    unprofiled step predicted from each bare trace; errors against the first. ``--stat mean``
    compares means (a loader whose workers alternate gives two step modes: the median sits in
    one of them, the mean is the throughput)."""
    stat = f"{a.stat}_ms"
    rows = []
    for root in a.dirs:
        for idx in sorted(root.glob("index-*.json")):
            jobs_ = {j["name"]: j for j in json.loads(idx.read_text())["jobs"]}
            for name, j in jobs_.items():
                if not name.endswith("-plain") or j.get("kind") in (None, "cal"):
                    continue
                rows.append((name[: -len("-plain")], j["kind"], root))
    bound = {"nanogpt": "launch", "timm": "loader", "timm-long": "loader",
             "uncaptured-cuda-graph": "launch", "unfused-attention": "GPU"}
    print(f"{a.stat} step, ms | workload | bound | script's own, plain run | script's own, "
          "under advisor | advisor measured | err | from nsys | err | from torch.profiler | err |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for base, kind, root in rows:
        fig = _script_figure(root / f"{base}-plain", kind)
        if fig is None:
            continue
        ref = fig[stat]
        prof = next((root / n for n in (f"{base}-kineto", base)
                     if (root / n / "advisor.json").exists()), None)
        same = None
        if prof is not None and kind != "scenario":
            f2 = _script_figure(prof, kind, _window(prof))
            same = f2[stat] if f2 else None
        cells = []
        meas = None
        for d in (prof, root / f"{base}-nsys"):
            p = d / "advisor.json" if d is not None else None
            if p is not None and p.exists():
                m = json.loads(p.read_text())["steps"].get("measured")
                if m and meas is None:
                    meas = m[stat]
        cells.append(meas)
        for d, name in ((root / f"{base}-nsys", "nsys_rank0.sqlite.gz"),
                        (prof, "trace_rank0.json.gz")):
            trace = d / name if d is not None else None
            pred = None
            if trace is not None and stored(trace).exists():
                an = _analysis(trace)
                rp, sm = an.results.replay, an.summary
                pred = ((rp.unprofiled_mean_ns or sm.mean_step_ns) if a.stat == "mean"
                        else (rp.unprofiled_median_ns or sm.median_step_ns)) / 1e6
            elif d is not None and (d / "advisor.json").exists():
                # trace not kept (size): the prediction advisor made of it on the device
                st = json.loads((d / "advisor.json").read_text())["steps"]
                pred = st.get(f"unprofiled_{a.stat}_ms")
            cells.append(pred)
        out = [f"{base}", bound.get(base, kind), f"{ref:.2f}",
               "–" if same is None else f"{same:.2f} ({(same - ref) / ref:+.1%})"]
        for v in cells:
            if v is None:
                out += ["–", "–"]
                continue
            err = (v - ref) / ref
            worst = max(worst, abs(err))
            flag = "**" if abs(err) > TOLERANCE else ""
            out += [f"{v:.2f}", f"{flag}{err:+.1%}{flag}"]
        print("| " + " | ".join(out) + " |")
    print(f"\nworst error {worst:.1%} (tolerance {TOLERANCE:.0%})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--part", choices=["A", "B", "C", "all"], required=True)
    c.add_argument("--ext", type=Path, default=ROOT / "ext")
    c.add_argument("--deadline", type=float, default=480.0)
    c.add_argument("--job-timeout", type=float, default=150.0)
    c.add_argument("--tiny", action="store_true")
    c.add_argument("--per-class", type=int, default=80,
                   help="training images per class (timm-long: a long epoch)")
    c.add_argument("--names", default="",
                   help="only runs whose names start with these (a,b; 'a$': exactly a)")
    for name in ("fit", "table"):
        p = sub.add_parser(name)
        p.add_argument("dirs", type=Path, nargs="+" if name == "table" else "*")
        if name == "table":
            p.add_argument("--stat", choices=["median", "mean"], default="median")
        else:
            p.add_argument("--rows", type=Path, help="rows saved by an earlier fit (fit_rows.json)")
    a = ap.parse_args()
    return {"collect": collect, "fit": fit, "table": table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
