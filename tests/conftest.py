"""Shared fixtures: where the real traces live, and gunzipped copies of our H100 captures."""

from __future__ import annotations

import gzip
import logging
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
SCENARIOS = ROOT / "fixtures" / "scenarios"
HANG_GUARD_S = 900
"""How long a test's subprocess may run before the test calls it a hang. A guard, not a timing:
these runs take seconds alone and minutes on a 2-core CI machine running the rest of the suite
beside them (one passed alone in 15 s and hit a 300 s limit under load); nothing that uses it
checks speed (benchmarks/ do)."""


def pytest_configure(config: pytest.Config) -> None:
    # The fixtures' traces live in git's object store (tests/fixture_store.py): check out any
    # that are missing before a test reads one. xdist's workers find them in place.
    from tests.fixture_store import StoreError, restore

    try:
        restore()
    except StoreError as exc:
        pytest.exit(f"fixture traces: {exc}", returncode=4)
    config.addinivalue_line(
        "markers", "grouped_by(*params): run this test's cases next to the other cases with the "
        "same values of these parameters (they share one cached analysis)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the cases marked ``grouped_by(...)`` by those parameters' values, in the slots they
    already hold: the cases of one trace run one after another (on one xdist worker, mostly), so
    a small per-worker cache analyses the trace once for all of them."""
    slots: dict[tuple[str, ...], list[int]] = {}
    for i, item in enumerate(items):
        mark = item.get_closest_marker("grouped_by")
        if mark is not None and hasattr(item, "callspec"):
            slots.setdefault(tuple(mark.args), []).append(i)
    for names, where in slots.items():
        def key(item: pytest.Item, names: tuple[str, ...] = names) -> tuple[str, ...]:
            return tuple(str(item.callspec.params[n]) for n in names)

        for i, item in zip(where, sorted((items[i] for i in where), key=key), strict=True):
            items[i] = item


def shared(rel: str) -> Path:
    p = SHARED_TRACES / rel
    if not p.exists():
        pytest.skip(f"shared trace {rel} is not present (../shared/traces is beside the repo in CI)")
    return p


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory: pytest.TempPathFactory):
    """Gunzip a fixture (``*.sqlite.gz``) once per session; returns the path of the copy."""
    cache: dict[Path, Path] = {}
    root = tmp_path_factory.mktemp("unpacked")

    def get(path: Path) -> Path:
        if path.suffix != ".gz" or path.name.endswith(".json.gz"):
            return path
        if path not in cache:
            out = root / f"{len(cache)}_{path.stem}"
            with gzip.open(path, "rb") as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            cache[path] = out
        return cache[path]

    return get




_CLUSTER = []  # the session's LocalCluster, once started (one per pytest process: xdist worker)


def session_scheduler() -> str:
    """The address of one local Dask cluster for the whole test session (``--scheduler``).

    A job analysis without ``--scheduler`` starts a `LocalCluster` of its own: worker processes
    that import advisor and Dask, seconds of a 2-core machine per analysis. The job tests that
    are about the analysis, not about how the local cluster is sized or torn down, pass this
    address instead, the way a user with a running cluster does (`advisor analyze --scheduler`):
    the same tasks run on the same kind of worker processes, started once. The tests of the
    local cluster itself (``--workers``, `advisor.job.cluster.local_workers`) keep starting
    theirs. Configured like `advisor.job.cluster.JobCluster`'s own: single-threaded worker
    processes (two), Dask's diagnostics off. Started on first use (a run of tests that need no
    cluster starts none), closed when the session ends (`pytest_sessionfinish`). A function,
    not only a fixture, so that a cached helper (``@cache def job(variant)``) can use it."""
    if not _CLUSTER:
        import dask
        from dask.distributed import LocalCluster

        from advisor.job.cluster import LOCAL_CONFIG

        with dask.config.set(LOCAL_CONFIG):
            _CLUSTER.append(LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                         dashboard_address=":0", silence_logs=logging.CRITICAL))
    return _CLUSTER[0].scheduler_address


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _CLUSTER:
        _CLUSTER.pop().close()


@pytest.fixture(scope="session")
def dask_scheduler() -> str:
    """`session_scheduler` as a fixture, for tests that take their inputs as fixtures."""
    return session_scheduler()


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module that times a real torch loop on the CPU: on a shared
    machine torch's OpenMP threads spin against each other (a 4-layer step took 500 ms with two
    threads on the two busy cores here, 0.4 ms with one)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
