"""The job across ranks: steps aligned by index, collectives matched, who waited for whom.

Inputs are the ranks' `RankSummary`s. The model

* aligns steps by the trace's own step number (``ProfilerStep#550`` is step 550 on every rank),
  falling back to position when the ranks' numbers do not meet;
* matches collectives across ranks: the i-th collective of one kind in a step is the same
  collective on every rank (NCCL requires all ranks to issue collectives in the same order);
* puts all ranks on one clock: ranks on different hosts have skewed clocks, but a collective ends
  on all ranks at about the same moment (no rank leaves a ring all-reduce before the last
  chunk arrives), so each rank's offset is the median difference of its collective end times
  from the lowest rank's;
* reads waiting off the entries: a rank that entered a collective before the last rank did
  waited (the NCCL kernel spins) for the difference; the last to enter set the pace;
* builds the job graph (networkx): per-rank segments of work between collectives, joined at each
  collective; its critical path says which rank and which collective set the job's pace.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.errors import AnalysisError

if TYPE_CHECKING:  # annotations only: loading the job rules (every `advisor analyze` does, to
    # check the plugins) need not import the rank summary's modules (start-up, issue #39)
    from advisor.engine.rank_summary import RankSummary, StepSummary

GRAPH_MAX_NODES = 400_000
"""Above this many segment nodes the critical path is taken per collective without networkx
(the same longest path, since every rank joins every collective; networkx's object graph would
need gigabytes at 1,000 ranks)."""


@dataclass
class CollectiveStat:
    kind: str
    count: int  # per step, per rank
    total_ns: float  # per step, mean over ranks
    exposed_ns: float
    waiting_ns: float
    host_ns: float = 0.0  # per step, mean over ranks: the host inside the collective's call ranges


@dataclass
class JobStep:
    index: int
    time_ns: int  # the job's step: the slowest rank's
    rank_time_ns: dict[int, int]
    rank_comm_ns: dict[int, int]
    rank_exposed_ns: dict[int, int]
    rank_waiting_ns: dict[int, int]
    rank_busy_ns: dict[int, int]  # step time minus exposed waiting: what the rank itself needed
    # The host's own work on the step (its step minus the time its calls were held waiting for
    # the GPU): a rank cannot step faster than that, however long its GPU spun in a collective
    # meanwhile (`advisor.engine.job_whatif.job_step_ns`). Empty where the trace has no steps of its own.
    rank_floor_ns: dict[int, int] = field(default_factory=dict)
    rank_idle_ns: dict[int, int] = field(default_factory=dict)  # the GPU ran nothing


@dataclass
class Straggler:
    rank: int
    excess_ns: float  # per step: how much longer it worked than the median other rank
    others_waiting_ns: float  # per step, the median other rank's waiting
    spent_on: dict[str, float]  # where the excess went, ns per step
    cause: str  # "input pipeline", "host work", "slower host ...", "slower kernels ...", "more work ..."
    evidence: dict[str, float] = field(default_factory=dict)


@dataclass
class Job:
    ranks: list[RankSummary]
    steps: list[JobStep]
    collectives: list[CollectiveStat]
    offsets_ns: dict[int, int]
    straggler: Straggler | None
    pace: dict[int, float]  # rank -> share of the critical path it set
    pace_collectives: dict[str, float]  # collective kind -> share of critical path waiting on it
    notes: list[str] = field(default_factory=list)
    rank_steps: dict[int, dict[int, StepSummary]] = field(default_factory=dict)  # rank -> index -> step
    rank_findings: list[dict] = field(default_factory=list)
    findings: list = field(default_factory=list)  # job rule findings (advisor.job.rule)
    below_threshold: list = field(default_factory=list)  # matched, under the reporting threshold
    skipped: list = field(default_factory=list)  # job rules whose requirements the job lacks

    def rank(self, rank: int) -> RankSummary:
        return next(r for r in self.ranks if r.rank == rank)

    @property
    def rank_ids(self) -> list[int]:
        return sorted(self.rank_steps) if self.rank_steps else [r.rank for r in self.ranks]

    @property
    def step_ns(self) -> float:
        return statistics.median(s.time_ns for s in self.steps) if self.steps else 0.0

    @property
    def withheld(self) -> str | None:
        """Why the job's estimates are withheld: the first rank whose steps cannot carry one."""
        for r in sorted(self.ranks, key=lambda r: r.rank):
            if r.withheld:
                return f"rank {r.rank}: {r.withheld}"
        return None

    @property
    def report_step_ns(self) -> float | None:
        """The slowest rank's own report step (`advisor analyze` of its trace alone gives the
        same), where the per-rank rules ran; the job goes at that rank's pace."""
        steps = [r.report_step_ns for r in self.ranks if r.report_step_ns]
        return max(steps) if steps else None

    def median_by_rank(self, attr: str) -> dict[int, float]:
        out = {}
        for r in self.rank_ids:
            vals = [getattr(s, attr)[r] for s in self.steps if r in getattr(s, attr)]
            out[r] = statistics.median(vals) if vals else 0.0
        return out


# ----- alignment --------------------------------------------------------------------------------


def _aligned_steps(ranks: list[RankSummary],
                   notes: list[str]) -> tuple[list[int], dict[int, dict[int, StepSummary]]]:
    with_steps = [r for r in ranks if r.steps]
    if not with_steps:
        raise AnalysisError("no rank has steady-state steps: nothing to align")
    missing = [r.rank for r in ranks if not r.steps]
    if missing:
        notes.append(f"ranks {_ranges(missing)} have no steps and are left out of the step view")
    common = set.intersection(*({s.index for s in r.steps} for r in with_steps))
    per_rank: dict[int, dict[int, StepSummary]] = {}
    if common:
        for r in with_steps:
            per_rank[r.rank] = {s.index: s for s in r.steps if s.index in common}
        return sorted(common), per_rank
    n = min(len(r.steps) for r in with_steps)
    notes.append("the ranks' step numbers do not meet: steps aligned by position instead")
    for r in with_steps:
        per_rank[r.rank] = {i: s for i, s in enumerate(r.steps[:n])}
    return list(range(n)), per_rank


def _matched(steps: dict[int, StepSummary], index: int, kinds: list[str]) -> dict[tuple[str, int], tuple]:
    out = {}
    seen: Counter[str] = Counter()
    for c in steps[index].collectives:
        if c.kind in kinds:
            out[(c.kind, seen[c.kind])] = c
            seen[c.kind] += 1
    return out


def _clock_offsets(ranks: list[int], per_rank: dict[int, dict[int, StepSummary]],
                   indices: list[int], notes: list[str], world: int = 0) -> tuple[dict[int, int], dict]:
    """Per rank, its clock minus the reference rank's, from collective end times.

    The premise, that the i-th collective of a kind is one collective of all ranks ending
    together, fails for collectives of sub-groups (tensor- or pipeline-parallel groups) and for
    point-to-point send/recv between pairs of ranks: their i-th instances on two ranks are
    different transfers. So the premise is tested: after the offsets, one collective's end
    times must agree across ranks to within a small part of its duration. Kinds whose ends
    scatter are left out of the clocks and of waiting, and a note says so.
    """
    matches: dict[tuple[int, str, int], dict[int, object]] = defaultdict(dict)
    for i in indices:
        counts = {r: Counter(c.kind for c in per_rank[r][i].collectives) for r in ranks}
        kinds = [k for k in counts[ranks[0]] if all(counts[r].get(k) == counts[ranks[0]][k] for r in ranks)]
        for r in ranks:
            for key, c in _matched(per_rank[r], i, kinds).items():
                matches[(i, *key)][r] = c
    offsets = _offsets(ranks, matches)
    # two ranks of a two-rank job: every collective and every send/recv involves both
    scattered = _scattered_kinds(matches, offsets) if max(len(ranks), world) > 2 else set()
    if scattered:
        matches = {k: m for k, m in matches.items() if k[1] not in scattered}
        offsets = _offsets(ranks, matches)
        notes.append(f"{', '.join(sorted(scattered))}: the i-th such collective does not end together "
                     f"on every rank (sub-group collectives or point-to-point transfers between pairs "
                     f"of ranks), so it is not matched across ranks: no waiting is measured for it")
    if not matches and len(ranks) > 1:
        notes.append("no collective matches across ranks: clocks assumed equal, no waiting measured")
    return offsets, matches


END_AGREEMENT = 0.25
"""A matched collective's end times (after the clock offsets) may spread over at most this part
of its median duration on the median instance: a ring or tree collective releases every rank
within a chunk's transfer of the last one, a small part of the whole."""
END_AGREEMENT_FLOOR_NS = 20_000  # below this, kernel-end timestamps and launch jitter dominate


def _offsets(ranks: list[int], matches: dict) -> dict[int, int]:
    ref = ranks[0]
    offsets = {ref: 0}
    for r in ranks[1:]:
        diffs = [m[r].end_ns - m[ref].end_ns for m in matches.values() if r in m and ref in m]
        offsets[r] = int(statistics.median(diffs)) if diffs else 0
    return offsets


def _scattered_kinds(matches: dict, offsets: dict[int, int]) -> set[str]:
    spread: dict[str, list[float]] = defaultdict(list)
    length: dict[str, list[int]] = defaultdict(list)
    for (_i, kind, _n), by_rank in matches.items():
        ends = [c.end_ns - offsets[r] for r, c in by_rank.items()]
        spread[kind].append(max(ends) - min(ends))
        length[kind].append(statistics.median(c.duration_ns for c in by_rank.values()))
    return {k for k, v in spread.items()
            if statistics.median(v) > max(END_AGREEMENT_FLOOR_NS,
                                          END_AGREEMENT * statistics.median(length[k]))}


# ----- the model --------------------------------------------------------------------------------


def build_job(ranks: list[RankSummary]) -> Job:
    notes: list[str] = []
    indices, per_rank = _aligned_steps(ranks, notes)
    ids = sorted(per_rank)
    world = max((r.world_size or 0 for r in ranks), default=0)
    offsets, matches = _clock_offsets(ids, per_rank, indices, notes, world)
    waiting: dict[tuple[int, int], int] = defaultdict(int)  # (rank, step) -> ns
    waiting_kind: dict[tuple[int, str], int] = defaultdict(int)
    for (i, kind, _n), by_rank in matches.items():
        entries = {r: c.start_ns - offsets[r] for r, c in by_rank.items()}
        last = max(entries.values())
        for r, c in by_rank.items():
            w = min(last - entries[r], c.duration_ns)
            c.waiting_ns = w
            waiting[(r, i)] += w
            waiting_kind[(r, kind)] += w
    steps = []
    for i in indices:
        ss = {r: per_rank[r][i] for r in ids}
        steps.append(JobStep(
            index=i, time_ns=max(s.time_ns for s in ss.values()),
            rank_time_ns={r: s.time_ns for r, s in ss.items()},
            rank_comm_ns={r: s.comm_ns for r, s in ss.items()},
            rank_exposed_ns={r: s.exposed_comm_ns for r, s in ss.items()},
            rank_waiting_ns={r: waiting[(r, i)] for r in ids},
            # Waiting costs a rank only where its GPU had nothing else to do: an early bucket's
            # all-reduce spinning beside the backward pass costs nothing, but it pushes the later
            # buckets back, so the loss shows up as exposed communication at the step's end. Per
            # step, the lost time is the waiting up to the exposed communication.
            rank_busy_ns={r: ss[r].time_ns - min(waiting[(r, i)], ss[r].exposed_comm_ns) for r in ids},
            rank_floor_ns={r: ss[r].host_own_ns for r in ids},
            rank_idle_ns={r: ss[r].idle_ns for r in ids},
        ))
    job = Job(ranks=ranks, steps=steps, collectives=_collective_stats(ids, per_rank, indices, waiting_kind),
              offsets_ns=offsets, straggler=None, pace={}, pace_collectives={}, notes=notes,
              rank_steps=per_rank)
    job.pace, job.pace_collectives = critical_path(ids, per_rank, indices, matches, offsets)
    job.straggler = find_straggler(job, per_rank)
    spread = max(offsets.values()) - min(offsets.values()) if offsets else 0
    if spread > 1_000_000:
        notes.append(f"rank clocks differ by up to {spread / 1e6:.1f} ms: aligned on collective ends")
    return job


def _collective_stats(ids, per_rank, indices, waiting_kind) -> list[CollectiveStat]:
    agg: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in ids:
        for i in indices:
            for c in per_rank[r][i].collectives:
                a = agg[c.kind]
                a[0] += 1
                a[1] += c.duration_ns
                a[2] += c.exposed_ns
    n = max(1, len(ids) * len(indices))
    host: dict[str, float] = defaultdict(float)
    for r in ids:
        for i in indices:
            for kind, ns in per_rank[r][i].host_collectives.items():
                host[kind] += ns
    out = [CollectiveStat(kind, round(a[0] / n), a[1] / n, a[2] / n,
                          sum(waiting_kind[(r, kind)] for r in ids) / n, host.get(kind, 0.0) / n)
           for kind, a in agg.items()]
    # collectives seen only as host ranges (no kernel in the window: gloo, CPU-only)
    out += [CollectiveStat(kind, 0, 0.0, 0.0, 0.0, ns / n) for kind, ns in host.items() if kind not in agg]
    return sorted(out, key=lambda c: -c.total_ns)


def critical_path(ids, per_rank, indices, matches, offsets) -> tuple[dict[int, float], dict[str, float]]:
    """The job graph's longest path: which rank and which collective set the pace.

    Nodes are collective instances (all ranks join there) and per-rank segments of work before
    each; an edge rank-segment -> collective weighs the time the rank worked since the previous
    collective ended. The longest path through a collective comes from the rank that arrived
    last, so the path's segments say who the others waited for.
    """
    import networkx as nx

    order = sorted(matches, key=lambda k: (indices.index(k[0]),
                                           min(c.start_ns - offsets[r] for r, c in matches[k].items())))
    nodes = len(order) * len(ids)
    pace: Counter[int] = Counter()
    pace_kind: Counter[str] = Counter()
    if not order:
        return {}, {}
    prev_exit: dict[int, int] = {}
    edges = []
    for n, key in enumerate(order):
        by_rank = matches[key]
        exit_ns = max(c.end_ns - offsets[r] for r, c in by_rank.items())
        for r, c in by_rank.items():
            entry = c.start_ns - offsets[r]
            start = prev_exit.get(key[0], per_rank[r][key[0]].start_ns - offsets[r])
            edges.append((("seg", r, n), ("coll", n), max(0, entry - start), r, key[1]))
        prev_exit[key[0]] = exit_ns
    if nodes <= GRAPH_MAX_NODES:
        g = nx.DiGraph()
        for seg, coll, w, r, _kind in edges:
            g.add_edge(seg, coll, weight=w, rank=r)
            n = coll[1]
            if n + 1 < len(order):
                g.add_edge(coll, ("seg", r, n + 1), weight=0)
        path = nx.dag_longest_path(g, weight="weight")
        chosen = [(a, b) for a, b in itertools.pairwise(path) if a[0] == "seg"]
        total = 0.0
        for a, b in chosen:
            d = g.edges[a, b]
            pace[d["rank"]] += d["weight"]
            pace_kind[order[b[1]][1]] += d["weight"]
            total += d["weight"]
    else:  # same longest path: per collective, the rank whose segment was longest
        best: dict[int, tuple[int, int, str]] = {}
        for _seg, coll, w, r, kind in edges:
            if coll[1] not in best or w > best[coll[1]][0]:
                best[coll[1]] = (w, r, kind)
        total = 0.0
        for w, r, kind in best.values():
            pace[r] += w
            pace_kind[kind] += w
            total += w
    total = total or 1.0
    return ({r: v / total for r, v in pace.most_common()},
            {k: v / total for k, v in pace_kind.most_common()})


# ----- straggler -------------------------------------------------------------------------------


def find_straggler(job: Job, per_rank: dict[int, dict[int, StepSummary]]) -> Straggler | None:
    """The rank that set most of the critical path, what it did with the time, and why."""
    ids = sorted(per_rank)
    if len(ids) < 2 or not job.pace:
        return None
    busy = job.median_by_rank("rank_busy_ns")
    wait = job.median_by_rank("rank_waiting_ns")
    s = max(job.pace, key=job.pace.get)
    others = [r for r in ids if r != s]
    excess = busy[s] - statistics.median(busy[r] for r in others)
    if excess <= 0:  # it set the pace without doing more than the others: nobody holds them back
        return None
    indices = [st.index for st in job.steps]

    def med(rank: int, fn) -> float:
        return statistics.median(fn(per_rank[rank][i]) for i in indices)

    def others_med(fn) -> float:
        return statistics.median(med(r, fn) for r in others)

    spent = {
        "GPU idle (host or input pipeline)": med(s, lambda x: x.idle_ns) - others_med(lambda x: x.idle_ns),
        "compute kernels": med(s, lambda x: x.compute_ns) - others_med(lambda x: x.compute_ns),
        "communication (own transfer)": (med(s, lambda x: x.comm_ns) - wait[s])
        - statistics.median(med(r, lambda x: x.comm_ns) - wait[r] for r in others),
    }
    evidence = {
        "data_phase_ns": med(s, lambda x: x.phase_ns.get("data", 0))
        - others_med(lambda x: x.phase_ns.get("data", 0)),
        "host_step_ns": med(s, lambda x: x.host_ns) - others_med(lambda x: x.host_ns),
    }
    # same kernels slower everywhere (clocks, power, a sick GPU) or some kernels more (more work)
    ratios = []
    for name in per_rank[s][indices[0]].kernel_ns:
        mine = med(s, lambda x, n=name: x.kernel_ns.get(n, 0))
        theirs = others_med(lambda x, n=name: x.kernel_ns.get(n, 0))
        if mine > 0 and theirs > 0:
            ratios.append(mine / theirs)
    kernel_ratio = statistics.median(ratios) if ratios else 1.0
    evidence["median_kernel_time_ratio"] = kernel_ratio
    main = max(spent, key=spent.get)
    if main.startswith("GPU idle"):
        # the data phase against the host's own extra work where the ranks have host floors: a
        # host-bound rank's peers spin in the all-reduce, so their GPU idle understates theirs
        # (only where both have floors: a GPU-bound rank has none, and its 0 is no host time)
        mine_floor, their_floor = med(s, lambda x: x.host_own_ns), others_med(lambda x: x.host_own_ns)
        floor_excess = mine_floor - their_floor if mine_floor > 0 and their_floor > 0 else 0.0
        evidence["host_floor_excess_ns"] = floor_excess
        if evidence["data_phase_ns"] > 0.5 * (floor_excess if floor_excess > 0 else spent[main]):
            cause = "input pipeline"
        elif slower := same_code_slowdown(per_rank, s, others, indices):
            evidence["host_slowdown_ratio"] = slower
            cause = "slower host (the same code ran slower)"
        else:
            cause = "host work"
    elif main == "compute kernels":
        cause = "slower kernels (clocks or a slower GPU)" if kernel_ratio > 1.05 else "more work on this rank"
    else:
        cause = "slower communication links"
    return Straggler(rank=s, excess_ns=excess, others_waiting_ns=statistics.median(wait[r] for r in others),
                     spent_on=spent, cause=cause, evidence=evidence)


def same_code_slowdown(per_rank: dict[int, dict[int, StepSummary]], rank: int, others: list[int],
                       indices: list[int]) -> float | None:
    """How much slower ``rank``'s host ran the phases every rank runs alike, when its extra host
    time lies there; None when it lies elsewhere or the ranks ran different work.

    Why: extra host work a rank does that the others do not (rank-0 logging, a checkpoint, an
    evaluation, a starved loader) sits outside the model's phases: in the data phase, or in step
    time no phase covers. Forward, loss, backward and the optimizer run the same code on every
    data-parallel rank; with as many runs of each (micro-batches) on the straggler as on the
    others, a longer stretch there is the same code on a slower CPU: oversubscribed cores
    (DataLoader workers, other ranks' threads), a rank far from its GPU's NUMA node, lower
    clocks, or the profiler's own cost. On the H200 2-GPU validation runs (docs/multigpu.md) the
    symmetric variants named either rank, from one profiler or the other, 1.1-1.5x "host work"
    ahead of the other, with the same phases slower: moving logging out of the step would have
    been the wrong advice. Returns the straggler's model-phase time over the others'.

    Missed by design: work only one rank does inside those phases (rank-0 gradient-norm logging
    or an EMA update inside the optimizer phase) reads as the same code on a slower host; the
    job view still names the straggler. Held time (see `advisor.engine.rank_summary._held`) counts
    against the model phases, where the launches and syncs that block sit.
    """
    def med(r: int, fn) -> float:
        return statistics.median(fn(per_rank[r][i]) for i in indices)

    def others_med(fn) -> float:
        return statistics.median(med(o, fn) for o in others)

    phases = {p for i in indices for r in (rank, *others) for p in per_rank[r][i].phase_ns}
    code = sorted(p for p in phases if p != "data")
    if not code:
        return None  # no phase marks: nothing says where the time went
    for p in phases:
        def runs(x: StepSummary, p: str = p) -> int:
            return x.phase_count.get(p, 0)
        if med(rank, runs) != others_med(runs):
            return None  # more micro-batches or phase runs: more work, not a slower host

    # less the time the host's calls were held by the device (the floor's deduction): waiting
    # inside these phases (a launch on a full queue, a sync), not host work. Held time is known
    # only where a rank has a floor; unless every rank compared has one, none is deducted, so
    # the ranks are measured alike
    floors = all(per_rank[r][i].host_own_ns > 0 for r in (rank, *others) for i in indices)

    def in_code(x: StepSummary) -> float:
        held = x.host_ns - x.host_own_ns if floors else 0
        return sum(x.phase_ns.get(p, 0) for p in code) - held

    def outside(x: StepSummary) -> float:  # the data phase and step time no phase covers
        return x.host_ns - sum(x.phase_ns.get(p, 0) for p in code)

    mine, theirs = med(rank, in_code), others_med(in_code)
    extra_code = mine - theirs
    extra_outside = med(rank, outside) - others_med(outside)
    if theirs <= 0 or extra_code <= 0 or extra_code < 2 * max(0.0, extra_outside):
        return None
    return mine / theirs


# ----- per-rank findings -----------------------------------------------------------------------


def merge_rank_findings(ranks: list[RankSummary]) -> list[dict]:
    """Per-rank rule findings, one entry per rule: the ranks that raised it and the spread."""
    by_rule: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for r in ranks:
        for f in r.findings:
            by_rule[f["rule"]].append((r.rank, f))
    analysed = [r.rank for r in ranks]
    out = []
    for rule, hits in by_rule.items():
        speedups = [f["speedup"] for _, f in hits]
        first = max(hits, key=lambda h: h[1]["speedup"])[1]
        ranks_hit = sorted(r for r, _ in hits)
        out.append({
            "rule": rule, "code": first["code"], "fix": first["fix"], "message": first["message"],
            "fix_snippet": first.get("fix_snippet", ""), "fix_kind": first.get("fix_kind", "code"),
            "ranks": ranks_hit, "all_ranks": len(ranks_hit) == len(analysed),
            "speedup_min": min(speedups), "speedup_median": statistics.median(speedups),
            "speedup_max": max(speedups),
        })
    return sorted(out, key=lambda f: -f["speedup_median"])


def _ranges(ids: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    ids = sorted(ids)
    parts, start = [], None
    for a, b in zip(ids, [*ids[1:], None]):
        start = a if start is None else start
        if b != a + 1:
            parts.append(f"{start}" if start == a else f"{start}-{a}")
            start = None
    return ", ".join(parts)


rank_ranges = _ranges
