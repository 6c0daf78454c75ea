"""One writer per thread: leases with fencing tokens.

A worker that runs or resumes a thread holds its lease for as long as it does::

    with saver.lease(thread_id):            # or: async with saver.alease(thread_id)
        graph.invoke(None, config)

Acquiring hands out a fencing token that only grows. While the block runs, the lease is
renewed every ``ttl / 3`` seconds, and every checkpoint, pending-write and ledger write
made in it carries the token: the write scripts accept it only while it is the newest
token of the thread, so a worker that stalled past its lease (a GC pause, a stopped VM)
and comes back after another took over gets ``LeaseLostError`` and changes nothing.
A write made outside any lease is rejected with ``LeaseHeldError`` while another worker
holds the thread; with nobody holding it, it goes ahead, so savers used without leases
behave exactly as before.

The plans are in ``core.py``; this module holds the context managers, which only drive
them and run the renewal (a daemon thread, or an asyncio task for ``alease``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_durable.errors import ConfigurationError, LeaseHeldError

if TYPE_CHECKING:
    from langgraph_durable.base import BaseRedisSaver

logger = logging.getLogger("langgraph_durable")
R = TypeVar("R")

DEFAULT_LEASE_TTL = 30.0
_POLL = 0.05  # seconds between attempts while waiting for a held lease

# (key prefix, thread id) -> fencing token, for the leases held in this context.
_HELD: contextvars.ContextVar[Mapping[tuple[str, str], str]] = contextvars.ContextVar(
    "langgraph_durable_leases", default=MappingProxyType({})
)


def held_token(prefix: str, thread_id: str) -> str:
    """The fencing token of the lease this context holds on the thread, or ``""``."""
    return _HELD.get().get((prefix, thread_id), "")


async def in_lease_context(held: Mapping[tuple[str, str], str], coro: Awaitable[R]) -> R:
    """Await ``coro`` with the caller's leases, for code run on another thread's loop."""
    _HELD.set(held)
    return await coro


def current_leases() -> Mapping[tuple[str, str], str]:
    return _HELD.get()


@dataclass
class Lease:
    """A held lease. ``lost`` turns true if a renewal found another worker holding it."""

    thread_id: str
    owner: str
    ttl: float
    token: str = ""
    lost: bool = False


def _new_owner() -> str:
    # Readable in LeaseHeldError and the CLI: which machine and process holds the thread.
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _new_lease(thread: str | Mapping[str, Any], ttl: float, wait: float) -> Lease:
    """The lease to acquire, once its options are known to be sound."""
    if not ttl > 0.003:
        raise ConfigurationError(f"lease ttl must be a number of seconds > 0, got {ttl!r}")
    if not wait >= 0:
        raise ConfigurationError(f"lease wait must be a number of seconds >= 0, got {wait!r}")
    if isinstance(thread, Mapping):
        from langgraph_durable.core import configurable  # core imports this module

        thread = configurable(thread)["thread_id"]  # type: ignore[arg-type]
    return Lease(str(thread), _new_owner(), ttl)


def _bind(saver: BaseRedisSaver, lease: Lease) -> contextvars.Token[Mapping[tuple[str, str], str]]:
    """Make this context's writes to the thread carry the lease's token."""
    return _HELD.set({**_HELD.get(), (saver.key_prefix, lease.thread_id): lease.token})


def _pause(exc: LeaseHeldError, deadline: float) -> float:
    """Seconds to sleep before trying again, or re-raise once ``deadline`` has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc
    return min(_POLL, left)


@contextmanager
def hold(
    saver: BaseRedisSaver, thread: str | Mapping[str, Any], ttl: float, wait: float
) -> Iterator[Lease]:
    lease = _new_lease(thread, ttl, wait)
    deadline = time.monotonic() + wait
    while not lease.token:
        try:
            lease.token = saver._drive_sync(saver.core.acquire_lease(lease))
        except LeaseHeldError as exc:
            time.sleep(_pause(exc, deadline))
    binding = _bind(saver, lease)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 3):
            try:
                outcome: bool | Exception = saver._drive_sync(saver.core.renew_lease(lease))
            except Exception as exc:  # noqa: BLE001 - whatever it was, renewal goes on
                outcome = exc
            if not _renewed(lease, outcome):
                return

    renewer = threading.Thread(target=renew, name=f"lease-{lease.thread_id}", daemon=True)
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join()
        _HELD.reset(binding)
        try:
            saver._drive_sync(saver.core.release_lease(lease))
        except Exception as exc:  # noqa: BLE001 - the lease expires on its own
            _release_failed(exc)


@asynccontextmanager
async def ahold(
    saver: BaseRedisSaver, thread: str | Mapping[str, Any], ttl: float, wait: float
) -> AsyncIterator[Lease]:
    lease = _new_lease(thread, ttl, wait)
    deadline = time.monotonic() + wait
    while not lease.token:
        try:
            lease.token = await saver._drive_async(saver.core.acquire_lease(lease))
        except LeaseHeldError as exc:
            await asyncio.sleep(_pause(exc, deadline))
    binding = _bind(saver, lease)

    async def renew() -> None:
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                outcome: bool | Exception = await saver._drive_async(saver.core.renew_lease(lease))
            except Exception as exc:  # noqa: BLE001 - whatever it was, renewal goes on
                outcome = exc
            if not _renewed(lease, outcome):
                return

    renewer = asyncio.create_task(renew())
    try:
        yield lease
    finally:
        renewer.cancel()
        _HELD.reset(binding)
        try:
            await saver._drive_async(saver.core.release_lease(lease))
        except Exception as exc:  # noqa: BLE001 - the lease expires on its own
            _release_failed(exc)


def _renewed(lease: Lease, outcome: bool | Exception) -> bool:
    """Note one renewal's outcome; False once the lease is lost for good."""
    if isinstance(outcome, Exception):  # a connection fault: the next round tries again
        logger.warning("langgraph-durable: renewing the lease failed: %s", outcome)
        return True
    if outcome:
        return True
    lease.lost = True  # tokens only grow: a newer one was handed out, this one never returns
    logger.error(
        "langgraph-durable: the lease on thread %r (token %s) was taken over; this "
        "worker's writes to it will be rejected",
        lease.thread_id,
        lease.token,
    )
    return False


def _release_failed(exc: Exception) -> None:
    logger.warning("langgraph-durable: releasing the lease failed (it expires): %s", exc)
