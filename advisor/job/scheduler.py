"""``--scheduler ADDRESS``: checked, then asked who it is, before a Dask client is built on it.

Dask's `Client` trusts its address: any scheme it knows is tried (``inproc://`` looks for a
scheduler in this process, ``ucx://`` needs UCX, ``tls://`` certificates, ``ws://`` a web
socket stack), anything else fails deep inside Dask, and a listener that accepts but never
speaks holds `Client` past its timeout, for good (over 300 s measured). A server that is not
Dask is read as Dask frames: a frame length taken from an HTTP reply asked for 3 EiB.

So the address is narrowed to what a ``dask scheduler`` started for advisor listens on, plain
TCP (``tcp://HOST:PORT``, or ``HOST:PORT``), and one message is exchanged first with a bounded
wait: Dask's ``identity`` request, which a scheduler answers with its type. The wait is Dask's
own connect timeout (``distributed.comm.timeouts.connect``, 30 s unless configured, e.g. by
``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from advisor.errors import InputError

_ADDRESS = re.compile(
    r"(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))"
    r":(?P<port>[0-9]{1,5})")
_FORM = "give tcp://HOST:PORT (or HOST:PORT) of a running `dask scheduler`"


def checked_address(address: str) -> str:
    """``address`` as ``tcp://HOST:PORT``; `InputError` in one line for anything else."""
    m = _ADDRESS.fullmatch(address)
    if m is None or not 0 < int(m.group("port")) < 65536:
        shown = address if len(address) <= 80 else address[:77] + "..."
        raise InputError(f"--scheduler {shown!r}: not a Dask scheduler address; {_FORM}")
    return f"tcp://{m.group('host')}:{int(m.group('port'))}"


def connect_timeout() -> float:
    """Seconds to wait for a scheduler: Dask's ``distributed.comm.timeouts.connect``."""
    import dask
    from dask.utils import parse_timedelta

    try:
        seconds = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    except (TypeError, ValueError, KeyError):
        seconds = None
    return float(seconds) if seconds and 0 < seconds < 3600 else 30.0


def probe_scheduler(address: str, timeout: float) -> None:
    """Ask ``address`` for its identity within ``timeout`` seconds; `InputError` unless a Dask
    scheduler answers. Any failure of the exchange, whatever Dask or the peer raised, means
    there is no scheduler to use there."""
    try:
        reply = asyncio.run(asyncio.wait_for(_identity(address, timeout), timeout))
    except (asyncio.TimeoutError, TimeoutError) as e:
        raise InputError(f"--scheduler {address}: no Dask scheduler answered within "
                         f"{timeout:g} s") from e
    except Exception as e:  # the peer's bytes decide what Dask raises
        raise InputError(f"--scheduler {address}: cannot reach a Dask scheduler there "
                         f"({type(e).__name__}: {str(e)[:120]})") from e
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise InputError(f"--scheduler {address}: what answered there is not a Dask scheduler")


async def _identity(address: str, timeout: float) -> Any:
    from distributed.comm import connect

    comm = await connect(address, timeout=timeout)
    try:
        await comm.write({"op": "identity"})
        return await comm.read()
    finally:
        comm.abort()
