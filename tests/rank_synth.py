"""Synthetic rank traces made from a real one: the input of the multi-rank scale benchmark.

Each rank is the real torch.profiler trace, rewritten as rank r of N: its own clock offset (ranks
on different hosts disagree by milliseconds), its ``distributedInfo``, and planted anomalies:

* a straggler rank: every other rank enters each collective ``delay_us`` earlier and waits for
  it there (its NCCL kernels start earlier and last longer, as a waiting NCCL kernel does), and
  its host's own work is shorter by as much per collective (its ``ProfilerStep`` range ends that
  much earlier): the base trace is host-bound (its GPU idles about 170 of 220 ms a step), so a
  straggler there is a rank whose host works longer, and the others' hosts finish first;
* exposed collectives: on every rank, each step's first collective lasts ``exposed_us`` longer;
* load imbalance (``rotate``): the late rank changes within and between steps: in the trace's
  j-th step, rank ``2j % world`` is late at the step's even collectives and rank
  ``(2j + 1) % world`` at its odd ones (uneven work per micro-batch), so the pace passes between
  ranks and no single rank sets it (what ``load-imbalance`` looks for); each wait is
  ``delay_us``, as a straggler's (``imbalance_saving_us`` is what balancing gives back).

Only timestamps and durations change; event counts and names stay the real trace's, so parsing
cost per rank is the real one.
"""

from __future__ import annotations

import bisect
import copy
import gzip
import json
import random
from pathlib import Path

BASE = (Path(__file__).resolve().parents[2] / "shared" / "traces" / "hta" / "nccl_parser_config"
        / "nccl_data.json.gz")


def load_base(path: str | Path = BASE) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _is_nccl_kernel(e: dict) -> bool:
    return e.get("cat") in ("kernel", "Kernel") and "nccl" in e.get("name", "").lower()


def rank_trace(base: dict, rank: int, world: int, straggler: int | None, delay_us: float,
               exposed_us: float, offset_us: float, rotate: bool = False) -> dict:
    doc = copy.copy(base)
    events = []
    steps = sorted(e["ts"] for e in base["traceEvents"]
                   if str(e.get("name", "")).startswith("ProfilerStep#") and "ts" in e)
    nccl = sorted(e["ts"] for e in base["traceEvents"] if _is_nccl_kernel(e))

    late = _rotating_late(steps, nccl, world)

    def waits(ts: float) -> bool:
        """Whether this rank waits for a later one at the collective starting at ``ts``."""
        if not rotate:
            return straggler is not None and rank != straggler
        return late.get(ts, rank) != rank
    firsts: set[int] = set()
    if exposed_us:  # the first collective kernel after each step's start
        kernels = sorted((e["ts"], i) for i, e in enumerate(base["traceEvents"]) if _is_nccl_kernel(e))
        for s in steps:
            nxt = next((i for ts, i in kernels if ts >= s), None)
            if nxt is not None:
                firsts.add(nxt)
    shorter: dict[int, float] = {}  # index of a ProfilerStep event -> host work taken off
    if (straggler is not None and rank != straggler) or rotate:
        for i, e in enumerate(base["traceEvents"]):
            if str(e.get("name", "")).startswith("ProfilerStep#") and "ts" in e:
                n = sum(1 for t in nccl if e["ts"] <= t < e["ts"] + e.get("dur", 0) and waits(t))
                shorter[i] = min(n * delay_us, 0.5 * e.get("dur", 0))
    for i, e in enumerate(base["traceEvents"]):
        if "ts" not in e:
            events.append(e)
            continue
        e = dict(e)
        e["ts"] = e["ts"] + offset_us
        if i in shorter:
            e["dur"] = e["dur"] - shorter[i]
        if _is_nccl_kernel(e):
            if waits(e["ts"] - offset_us):
                e["ts"] -= delay_us
                e["dur"] = e.get("dur", 0) + delay_us
            if i in firsts:
                e["dur"] = e.get("dur", 0) + exposed_us
        events.append(e)
    doc["traceEvents"] = events
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return doc


def _rotating_late(steps: list[float], nccl: list[float], world: int) -> dict[float, int]:
    """Collective start -> the rank late there, under ``rotate``."""
    by_step: dict[int, list[float]] = {}
    for ts in nccl:
        by_step.setdefault(bisect.bisect_right(steps, ts) - 1, []).append(ts)
    return {ts: (2 * j + k % 2) % world
            for j, group in by_step.items() for k, ts in enumerate(group)}


def imbalance_saving_us(collectives: int, world: int, delay_us: float) -> float:
    """What balancing gives back per step under ``rotate``: each rank's own work is the step's
    minus its waits, and the job runs at the most loaded rank's; at the mean over ranks it runs
    ``delay_us x (mean waits - fewest waits)`` faster."""
    first = (collectives + 1) // 2  # the even collectives, where the first late rank is late
    waits = [collectives - first, first] + [collectives] * (world - 2)
    return delay_us * (sum(waits) / world - min(waits))


def offsets(world: int, seed: int = 0) -> list[float]:
    """The clock offset (µs) planted on each rank."""
    rng = random.Random(seed)
    return [rng.uniform(-5000, 5000) for _ in range(world)]


def _write(doc: dict, p: Path) -> None:
    with gzip.open(p, "wt", encoding="utf-8", compresslevel=1) as f:
        json.dump(doc, f, separators=(",", ":"))


def write_ranks(out: Path, world: int, straggler: int | None = None, delay_us: float = 2000.0,
                exposed_us: float = 0.0, seed: int = 0, base: dict | None = None,
                distinct: int | None = None, rotate: bool = False) -> list[Path]:
    """Write ``rank{r}.json.gz`` for r in 0..world-1 (gzip level 1: fast to write).

    With ``distinct``, only that many different files are written and the other ranks are hard
    links to them, named by rank and without a rank in their metadata (the rank then comes from
    the file name): writing 1,000 real-size traces would take longer than analysing them.
    """
    base = base or load_base()
    out.mkdir(parents=True, exist_ok=True)
    shift = offsets(world, seed)
    paths = []
    pool: dict[tuple[bool, int], Path] = {}
    for r in range(world):
        p = out / f"rank{r}.json.gz"
        if p.exists():
            p.unlink()
        if distinct is None:
            _write(rank_trace(base, r, world, straggler, delay_us, exposed_us, shift[r], rotate), p)
        else:
            key = (r == straggler, r % distinct)
            if key not in pool:
                doc = rank_trace(base, r, world, straggler, delay_us, exposed_us, shift[key[1]])
                doc["distributedInfo"] = {"backend": "nccl", "world_size": world}
                pool[key] = out / f"variant{int(key[0])}_{key[1]}.json.gz.src"
                _write(doc, pool[key])
            p.hardlink_to(pool[key])
        paths.append(p)
    return paths
