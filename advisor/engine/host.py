"""What `advisor profile` knows about the host and the script beyond the trace.

A trace records what ran, not what the machine could have run instead: how many cores the job
may use, how its DataLoader is configured, which frameworks the script imported. `advisor
profile` records these (`advisor.capture.session`); for a bare trace they are unknown, and a
rule that needs one states the value it assumed instead (`HostFacts.cores_or_assumed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.engine.loader_model import LoaderRun, observe

ASSUMED_CORES = 8
"""Cores a loader may use when the trace does not say: a conservative share of a training
node's host (H100 servers have 8 GPUs on 96-224 cores, ~12-28 per GPU; cloud VMs with one GPU
often 8-16). Stated in the estimate's assumptions whenever used."""


RUN_KEYS = ("loader", "host_cores", "step_times", "activity", "recorded", "settled_at")
"""What `loader_model.observe` reads of the session's state."""


@dataclass(frozen=True)
class LoaderConfig:
    """The DataLoader the training loop draws from (the one with the most batches)."""

    num_workers: int
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    batch_size: int | None


@dataclass(frozen=True)
class HostFacts:
    cores: int | None = None  # CPUs this process may run on (sched_getaffinity)
    loader: LoaderConfig | None = None
    # Host CPU time (thread time, ns) the training thread spent producing one batch inside
    # DataLoader.__next__: with num_workers=0 the whole loading cost of a batch.
    loader_cpu_ns_per_batch: float | None = None
    loader_wall_ns_per_batch: float | None = None
    modules: tuple[str, ...] = ()  # framework packages the script imported
    loop_modules: tuple[str, ...] = ()  # packages on the stack of the first optimizer.step()
    # The loader's rates, start-up cost and epochs from the run's step clock (`loader_model`)
    loader_run: LoaderRun | None = None
    # Steps in which a DataLoader iterator started (its timed ``__iter__``), the recorded
    # window's included: the run's epoch and evaluation boundaries (`loader_starts`)
    loader_start_steps: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Recorded by `advisor profile` (its hooks watched every DataLoader the script built): a
    # None ``loader`` then means the script built none, not that nobody looked.
    captured: bool = False

    @property
    def no_dataloader(self) -> bool:
        """The script drew its batches from no DataLoader (its own code prepared them)."""
        return self.captured and self.loader is None

    def cores_or_assumed(self) -> tuple[int, str | None]:
        """The host's cores, or `ASSUMED_CORES` with the assumption to state."""
        if self.cores:
            return self.cores, None
        return ASSUMED_CORES, (f"the host has {ASSUMED_CORES} cores for data loading (the trace "
                               "does not record the host's cores; run under `advisor profile`)")

    @classmethod
    def from_state(cls, state: Any) -> HostFacts:
        """From the capture session's state (an object or the status file's dict)."""
        get = state.get if isinstance(state, Mapping) else (lambda k, d=None: getattr(state, k, d))
        loader = get("loader", None) or None
        cfg = None
        if loader:
            cfg = LoaderConfig(int(loader.get("num_workers", 0)), bool(loader.get("pin_memory")),
                               bool(loader.get("persistent_workers")),
                               loader.get("prefetch_factor"), loader.get("batch_size"))
        batches = cpu_batches = 0
        cpu = wall = 0
        activity = get("activity", {}) or {}
        starts = tuple(sorted(int(k) for k, a in activity.items() if a.get("loader_start_calls")))
        # outside the recorded window: the profiler slows the loading thread it traces
        recorded = {int(i) for i in get("recorded", ()) or ()}
        for key, act in activity.items():
            if int(key) in recorded:
                continue
            if act.get("data_batches"):
                batches += act["data_batches"]
                wall += act.get("data", 0)
                if "data_cpu" in act:  # CPU-timed batches: those of loaders without workers
                    cpu += act["data_cpu"]  # (every batch in captures made before that rule)
                    cpu_batches += act.get("data_cpu_batches", act["data_batches"])
        return cls(
            cores=get("host_cores", None),
            loader=cfg,
            loader_cpu_ns_per_batch=cpu / cpu_batches if cpu_batches else None,
            loader_wall_ns_per_batch=wall / batches if batches else None,
            modules=tuple(get("framework_modules", ()) or ()),
            loop_modules=tuple(get("loop_modules", ()) or ()),
            loader_run=observe({k: get(k, None) for k in RUN_KEYS}),
            loader_start_steps=starts,
            captured=True,
        )
