"""What CUDA runtime/driver calls do to the host, by name.

Traces name calls differently (``cudaLaunchKernel_v7000`` in nsys, ``cudaLaunchKernel`` in Kineto,
``cuLaunchKernelEx`` from Triton), so every rule asks these predicates instead of matching names.
"""

from __future__ import annotations

import re

_VERSION_SUFFIX = re.compile(r"_v\d+$|_ptsz$|_ptds$")


def normalize(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``; ``cuMemcpyAsync_ptsz`` -> ``cuMemcpyAsync``."""
    prev = None
    while prev != name:
        prev, name = name, _VERSION_SUFFIX.sub("", name)
    if name.startswith("hip") and not name.startswith("hipExt"):
        name = "cuda" + name[3:]  # HIP mirrors the CUDA runtime API one to one (ROCm traces)
    return name


LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchGrid",
        "cuLaunchGridAsync",
    }
)
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})

# Calls that block the calling host thread until the device has finished earlier work.
SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
# Copies: the synchronous flavours block the host; async ones do too from pageable memory.
COPY_CALLS_SYNC = frozenset(
    {"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
     "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy2D", "cuMemcpy3D"}
)
COPY_CALLS_ASYNC = frozenset(
    {"cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemcpyPeerAsync",
     "cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync"}
)
# Memsets that return only once the device has written (the Async ones do not block).
BLOCKING_MEMSET_CALLS = frozenset({"cudaMemset", "cuMemsetD8", "cuMemsetD32"})
# Allocation calls: slow, and cudaFree / cudaFreeHost synchronize the whole device.
ALLOC_CALLS = frozenset(
    {"cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cudaHostRegister",
     "cudaHostUnregister", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocManaged",
     "cuMemAlloc", "cuMemFree", "cuMemAllocHost", "cuMemHostAlloc", "cuMemFreeHost",
     "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemAddressReserve",
     "cuMemAddressFree", "cuMemSetAccess", "cuMemHostRegister", "cuMemHostUnregister"}
)
DEVICE_SYNCING_ALLOC_CALLS = frozenset({"cudaFree", "cudaFreeHost", "cuMemFree", "cuMemFreeHost"})


_LAUNCHES = LAUNCH_CALLS | GRAPH_LAUNCH_CALLS
_MAY_BLOCK = (SYNC_CALLS | COPY_CALLS_SYNC | COPY_CALLS_ASYNC | DEVICE_SYNCING_ALLOC_CALLS
              | BLOCKING_MEMSET_CALLS)
# One set lookup each: rules and the replay ask these of every call in the window, many times.


def is_launch(name: str) -> bool:
    return name in _LAUNCHES


def is_sync(name: str) -> bool:
    return name in SYNC_CALLS


def is_alloc(name: str) -> bool:
    return name in ALLOC_CALLS


def may_block(name: str) -> bool:
    """Calls during which the host may wait for the device: syncs, copies, freeing allocations,
    synchronous memsets."""
    return name in _MAY_BLOCK


LONG_CALL_NS = 100_000
"""A CUDA call that takes longer than this was held by the device (a launch into a full queue,
an allocation that waits for memory): its time beyond it is not the host's own work."""
