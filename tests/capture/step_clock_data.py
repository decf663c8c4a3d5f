"""Step figures of the real H100 runs under `advisor profile` (fixtures/archive/unprofiled): the
scripts' own logs, the iterations to leave out around advisor's window, and the timing of the
analysis beside the job. tests/capture/test_h100_step_clock.py checks them and
benchmarks/unprofiled_check.py and benchmarks/background_cost.py print them; here because tests
never import from benchmarks/ (issue 31 item 5)."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

NANOGPT_ITER = re.compile(r"^iter (\d+): loss [-\d.naninf]+, time ([\d.]+)ms", re.M)
TIMM_TRAIN = re.compile(r"Train: (\d+) \[\s*(\d+)/\d+ .*?Time: ([\d.]+)s,")


def _fig(ms: list[float]) -> dict | None:
    if len(ms) < 3:
        return None
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "n": len(ms)}


def _script_figure(d: Path, kind: str, away: tuple[int, int] | None = None) -> dict | None:
    """The script's own step figure from its log; ``away``: iterations to leave out (the
    recorded window and the steps next to it, in a run under advisor)."""
    if kind == "scenario":
        p = d / "timing.json"
        if not p.exists():
            return None
        t = json.loads(p.read_text())
        per = t.get("per_step_ms") or []
        return {"median_ms": statistics.median(per[1:]) if len(per) > 2
                else t["step_ms_cuda_events"]["median"],
                "mean_ms": statistics.fmean(per[1:]) if len(per) > 2
                else t["step_ms_cuda_events"]["median"], "n": len(per)}
    log = ""
    if (d / "log.txt").exists():
        log = (d / "log.txt").read_text(errors="replace")
    elif (d / "log.txt.gz").exists():  # kept compressed in fixtures/
        log = gzip.decompress((d / "log.txt.gz").read_bytes()).decode(errors="replace")
    if kind == "nanogpt":
        its = [(int(i), float(t)) for i, t in NANOGPT_ITER.findall(log) if int(i) >= 10]
    else:
        its = [(int(i), float(t) * 1e3) for _, i, t in TIMM_TRAIN.findall(log) if int(i) >= 2]
    if away is not None:
        its = [(i, t) for i, t in its if not away[0] <= i <= away[1]]
    return _fig([t for _, t in its])


def _window(d: Path) -> tuple[int, int] | None:
    """Iterations of the script's own log to leave out around advisor's window (step N ends at
    iteration N + 1's optimizer step: a margin of two on each side)."""
    p = d / "steps_rank0.json"
    if not p.exists():
        return None
    st = json.loads(p.read_text())["state"]
    if st.get("window_first") is None or not st.get("recorded"):
        return None
    return st["window_first"] - 1, max(st["recorded"]) + 3


def _median_ms(values: list[float]) -> float | None:
    return statistics.median(values) * 1e3 if values else None


def measure(out: Path) -> dict:
    """Timing of one `advisor profile` run's analysis beside the job, from its --out folder."""
    status = json.loads((out / "background_rank0.json").read_text())
    steps = json.loads((out / "steps_rank0.json").read_text())
    st = steps["state"]
    t0 = float(st["run_start_unix"])
    rec = st.get("recorded") or []
    lo, hi = (min(rec) - 1, max(rec) + 1) if rec else (-1, -1)
    settled = st.get("settled_at") or st.get("window_first") or 0
    window_end = None
    during, after = [], []
    for i, b, e in st["step_times"]:
        if rec and i == max(rec):
            window_end = t0 + e / 1e9
        if i <= settled or lo <= i <= hi:
            continue
        start, end = t0 + b / 1e9, t0 + e / 1e9
        dur = (e - b) / 1e9
        if end <= status["reported"] and start >= status["started"]:
            during.append(dur)
        elif start >= status["reported"]:
            after.append(dur)
    job_end = t0 + st["run_end_ns"] / 1e9 if st.get("run_end_ns") else None
    return {
        "window_closed_to_reports_s": status["reported"] - window_end if window_end else None,
        "analysis_s": status.get("analysed", status["reported"]) - status["started"],
        "job_ran_on_after_reports_s": job_end - status["reported"] if job_end else None,
        "steps_during": len(during), "during_ms": _median_ms(during),
        "steps_after": len(after), "after_ms": _median_ms(after),
        "state": status.get("state"), "whole_run": status.get("whole_run"),
    }


CALIBRATION_COLUMNS = {"kineto": ["calls", "ops"], "kineto-stack": ["calls", "ops", "pys"]}
"""The per-step event counts each profiler mode's overhead is fitted on (other modes: calls)."""


def fit_overheads(rows: list[dict]) -> dict[str, tuple[list[str], list[float]]]:
    """Per profiler mode: least squares (non-negative) of (raw replay - plain run), in ns, over the
    per-step event counts; (columns, ns per event)."""
    import numpy as np
    from scipy.optimize import nnls

    out: dict[str, tuple[list[str], list[float]]] = {}
    for mode in sorted({r["mode"] for r in rows}):
        rs = [r for r in rows if r["mode"] == mode]
        cols = CALIBRATION_COLUMNS.get(mode, ["calls"])
        x = np.array([[r[c] for c in cols] for r in rs], dtype=float)
        y = np.array([(r["raw_replay_ms"] - r["plain_ms"]) * 1e6 for r in rs])
        coef, _ = nnls(x, y)
        out[mode] = (cols, [float(v) for v in coef])
    return out
