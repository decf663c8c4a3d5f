"""The interpreter's garbage collections in this process, written at exit (issue 32).

Loaded at start-up by ``gcstat.pth`` (installed into site-packages by ``wave5_overhead.sh``)
when ``GCSTAT`` names a file: every Python process of a run (the plain script, advisor and its
script) appends one line with its collections per generation (count, total and longest pause),
its tracked objects and modules at exit. It tells whether the slow iterations of a job under
advisor's hooks are collections of a larger heap, without changing the script.
"""

import atexit
import gc
import os
import sys
import time

_start = [0.0]
_n = [0, 0, 0]
_t = [0.0, 0.0, 0.0]
_max = [0.0, 0.0, 0.0]


def _callback(phase: str, info: dict) -> None:
    if phase == "start":
        _start[0] = time.perf_counter()
        return
    g = info["generation"]
    d = time.perf_counter() - _start[0]
    _n[g] += 1
    _t[g] += d
    _max[g] = max(_max[g], d)


def _report() -> None:
    gens = " ".join(f"gen{g} n={_n[g]} total={_t[g] * 1e3:.1f}ms max={_max[g] * 1e3:.2f}ms"
                    for g in range(3))
    with open(os.environ["GCSTAT"], "a") as fh:
        fh.write(f"{os.environ.get('GCSTAT_TAG', '-')} pid={os.getpid()} "
                 f"argv={' '.join(sys.argv[:3])[:120]!r} objects={len(gc.get_objects())} "
                 f"frozen={gc.get_freeze_count()} modules={len(sys.modules)} {gens}\n")


gc.callbacks.append(_callback)
atexit.register(_report)
