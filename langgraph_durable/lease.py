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

The plans and the token a write carries are in ``fencing.py``; this module holds the
context managers. Acquiring (waiting while another worker holds the thread) and renewing
are each one sequence of plans and waits (``_acquiring``, ``_renewing``), driven from
sync code (``_run``: ``saver.drive``, the renewal on a daemon thread) or async code
(``_arun``: ``adrive``, the renewal an asyncio task).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol, TypeVar

from langgraph_durable.core import fencing
from langgraph_durable.core.errors import ConfigurationError, LeaseHeldError
from langgraph_durable.core.fencing import Lease
from langgraph_durable.core.inputs import configurable
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.saver_core import SaverCore
from langgraph_durable.core.walk import Walk
from langgraph_durable.io.telemetry import Telemetry

_T = TypeVar("_T")


class LeaseHolder(Protocol):
    """What a lease needs of its saver (``RedisSaver`` and ``AsyncRedisSaver``)."""

    core: SaverCore
    key_prefix: str
    telemetry: Telemetry

    def drive(self, plan: Plan[_T]) -> _T: ...
    async def adrive(self, plan: Plan[_T]) -> _T: ...


__all__ = ["DEFAULT_LEASE_TTL", "Lease", "ahold", "hold"]

logger = logging.getLogger("langgraph_durable")

DEFAULT_LEASE_TTL = 30.0
_POLL = 0.05  # seconds between attempts while waiting for a held lease


def _new_lease(thread: str | Mapping[str, Any], ttl: float, wait: float) -> Lease:
    """The lease to acquire, once its options are known to be sound."""
    if not ttl > 0.003:
        raise ConfigurationError(f"lease ttl must be a number of seconds > 0, got {ttl!r}")
    if not wait >= 0:
        raise ConfigurationError(f"lease wait must be a number of seconds >= 0, got {wait!r}")
    if isinstance(thread, Mapping):
        thread = configurable(thread)["thread_id"]  # type: ignore[arg-type]
    return Lease(str(thread), fencing.new_owner(), ttl)


def _pause(exc: LeaseHeldError, deadline: float) -> float:
    """Seconds to sleep before trying again, or re-raise once ``deadline`` has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc
    return min(_POLL, left)


# A lease's two sequences, written once for both shells: each yields a plan to drive
# (sent its result, or thrown its error) or a float, the seconds to wait first.
Sequence = Generator["Plan[Any] | float", Any, _T]


def _acquiring(saver: LeaseHolder, lease: Lease, wait: float) -> Sequence[str]:
    """Acquire ``lease``, trying again while another worker holds it, for ``wait`` s.
    The first attempt is the operation telemetry shows; the polls after it are not, and
    a refusal is counted once, when the lease gives up."""
    deadline = time.monotonic() + wait
    attempt = saver.core.acquire_lease(lease)
    while True:
        sent = time.monotonic()
        try:
            token: str = yield attempt
            lease.renewed_at = sent  # held from here: ttl at least from when it was sent
            return token
        except LeaseHeldError as exc:
            try:
                pause = _pause(exc, deadline)
            except LeaseHeldError:
                holder = {"lgd.lease.holder": exc.holder}
                saver.telemetry.event("lgd.lease.refused", holder, lease.thread_id)
                raise
            yield pause
            attempt = fencing.acquire_lease(saver.core, lease)


def _renewing(saver: LeaseHolder, lease: Lease) -> Sequence[None]:
    """Renew ``lease`` every ``ttl / 3`` s until it is lost for good (or stopped)."""
    while True:
        yield lease.ttl / 3
        sent = time.monotonic()
        try:
            outcome: bool | Exception = yield saver.core.renew_lease(lease)
        except Exception as exc:  # noqa: BLE001 - whatever it was, renewal goes on
            outcome = exc
        if outcome is True:
            lease.renewed_at = sent  # the server's expiry is at least ttl after this
        if not _renewed(saver, lease, outcome):
            return


def _run(saver: LeaseHolder, steps: Sequence[_T], waited: Callable[[float], bool]) -> _T | None:
    """Drive ``steps`` from sync code; ``waited(s)`` waits, True to stop (None returned)."""
    walk = Walk(steps)
    for step in walk:
        if isinstance(step, float):
            if waited(step):
                return None
            continue
        try:
            walk.reply = saver.drive(step)
        except Exception as exc:  # noqa: BLE001 - thrown into the sequence, which decides
            walk.error = exc
    return walk.result


async def _arun(saver: LeaseHolder, steps: Sequence[_T]) -> _T:
    """Drive ``steps`` from async code (cancelling the task stops it)."""
    walk = Walk(steps)
    for step in walk:
        if isinstance(step, float):
            await asyncio.sleep(step)
            continue
        try:
            walk.reply = await saver.adrive(step)
        except Exception as exc:  # noqa: BLE001 - as above
            walk.error = exc
    return walk.result


def _slept(seconds: float) -> bool:
    time.sleep(seconds)
    return False


@contextmanager
def hold(
    saver: LeaseHolder, thread: str | Mapping[str, Any], ttl: float, wait: float
) -> Iterator[Lease]:
    lease = _new_lease(thread, ttl, wait)
    lease.token = _run(saver, _acquiring(saver, lease, wait), _slept)  # type: ignore[assignment]
    binding = fencing.bind(saver.key_prefix, lease.thread_id, lease.token)
    stop = threading.Event()
    renewer = threading.Thread(  # in the caller's context: its spans' parent too
        target=contextvars.copy_context().run,
        args=(_run, saver, _renewing(saver, lease), stop.wait),
        name=f"lease-{lease.thread_id}",
        daemon=True,
    )
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join()
        fencing.unbind(binding)
        try:
            saver.drive(saver.core.release_lease(lease))
        except Exception as exc:  # noqa: BLE001 - the lease expires on its own
            _release_failed(exc)


@asynccontextmanager
async def ahold(
    saver: LeaseHolder, thread: str | Mapping[str, Any], ttl: float, wait: float
) -> AsyncIterator[Lease]:
    lease = _new_lease(thread, ttl, wait)
    lease.token = await _arun(saver, _acquiring(saver, lease, wait))
    binding = fencing.bind(saver.key_prefix, lease.thread_id, lease.token)
    renewer = asyncio.create_task(_arun(saver, _renewing(saver, lease)))
    try:
        yield lease
    finally:
        renewer.cancel()
        fencing.unbind(binding)
        try:
            await saver.adrive(saver.core.release_lease(lease))
        except Exception as exc:  # noqa: BLE001 - the lease expires on its own
            _release_failed(exc)


def _renewed(saver: LeaseHolder, lease: Lease, outcome: bool | Exception) -> bool:
    """Note one renewal's outcome; False once the lease is lost for good."""
    if isinstance(outcome, Exception):  # a connection fault: the next round tries again
        logger.warning("langgraph-durable: renewing the lease failed: %s", outcome)
        if lease.lost:  # past its ttl without a renewal: another worker may hold it now
            logger.error(
                "langgraph-durable: the lease on thread %r (token %s) expired while its "
                "renewal failed; this worker no longer holds the thread for sure",
                lease.thread_id,
                lease.token,
            )
            saver.telemetry.event(
                "lgd.lease.lost", {"lgd.lease.token": str(lease.token)}, lease.thread_id
            )
        return True
    if outcome:
        return True
    lease.lost = True  # tokens only grow: a newer one was handed out, this one never returns
    saver.telemetry.event("lgd.lease.lost", {"lgd.lease.token": str(lease.token)}, lease.thread_id)
    logger.error(
        "langgraph-durable: the lease on thread %r (token %s) was taken over; this "
        "worker's writes to it will be rejected",
        lease.thread_id,
        lease.token,
    )
    return False


def _release_failed(exc: Exception) -> None:
    logger.warning("langgraph-durable: releasing the lease failed (it expires): %s", exc)
