"""Fencing: which lease a write carries, and the plans that hand leases out.

Owns the fencing token of every lease this context holds (a context variable, so each
thread and asyncio task writes with its own leases), the ``Lease`` record, and the lease
plans (acquire, renew, release; ``lua/lease.lua``). Rules it keeps:
  * Tokens only grow. A write script accepts a token only while it is the thread's
    newest, so a worker that stalled past its lease changes nothing (``LeaseLostError``).
  * A write made in no lease carries ``""``: refused while another worker holds the
    thread (``LeaseHeldError``), accepted when nobody does.
The context managers that hold a lease and renew it live in ``lease.py``; the write
plans (``writes.py``, the ledger) ask ``held_token`` what to send.
"""

from __future__ import annotations

import contextvars
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import LeaseHeldError
from langgraph_durable.core.ops import Plan, Script
from langgraph_durable.core.records import as_text

R = TypeVar("R")

# (key prefix, thread id) -> fencing token, for the leases held in this context.
_HELD: contextvars.ContextVar[Mapping[tuple[str, str], str]] = contextvars.ContextVar(
    "langgraph_durable_leases", default=MappingProxyType({})
)


def held_token(prefix: str, thread_id: str) -> str:
    """The fencing token of the lease this context holds on the thread, or ``""``."""
    return _HELD.get().get((prefix, thread_id), "")


def current_leases() -> Mapping[tuple[str, str], str]:
    """Every lease this context holds, to carry into code run on another thread."""
    return _HELD.get()


async def in_lease_context(held: Mapping[tuple[str, str], str], coro: Awaitable[R]) -> R:
    """Await ``coro`` with the caller's leases, for code run on another thread's loop."""
    _HELD.set(held)
    return await coro


def bind(
    prefix: str, thread_id: str, token: str
) -> contextvars.Token[Mapping[tuple[str, str], str]]:
    """Make this context's writes to the thread carry ``token`` (undo with ``unbind``)."""
    return _HELD.set({**_HELD.get(), (prefix, thread_id): token})


def unbind(binding: contextvars.Token[Mapping[tuple[str, str], str]]) -> None:
    _HELD.reset(binding)


@dataclass
class Lease:
    """A held lease. ``lost`` turns true once a renewal found another worker holding it,
    or once ``ttl`` seconds passed since the last renewal that got through was sent (a
    Redis that stopped answering, a worker that stalled): from then on this worker can
    no longer be sure it holds the thread, and learns it without a round trip."""

    thread_id: str
    owner: str
    ttl: float
    token: str = ""
    taken_over: bool = False
    # time.monotonic() when the last acquire or renewal that got through was sent: the
    # server's expiry is at least ttl after it
    renewed_at: float = field(default_factory=time.monotonic)

    @property
    def lost(self) -> bool:
        return self.taken_over or time.monotonic() - self.renewed_at >= self.ttl

    @lost.setter
    def lost(self, value: bool) -> None:
        self.taken_over = value


def this_worker() -> str:
    """Which machine and process this is (host:pid), as leases and ledger records name it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def new_owner() -> str:
    """Readable in LeaseHeldError and the CLI: which machine and process holds the thread."""
    return f"{this_worker()}:{uuid.uuid4().hex[:8]}"


def _lease_script(ctx: PlanContext, lease: Lease, op: str, token: str = "") -> Script:
    args = [op, lease.owner, max(1, round(lease.ttl * 1000)), token, ctx.ttl_arg]
    return Script("lease", ctx.keys.thread(lease.thread_id).for_writes(), args)


def acquire_lease(ctx: PlanContext, lease: Lease) -> Plan[str]:
    """The new fencing token, or LeaseHeldError naming the worker that holds it."""
    reply = yield _lease_script(ctx, lease, "acquire")
    if int(reply[0]) == 1:
        return as_text(reply[1])
    raise LeaseHeldError(
        thread_id=lease.thread_id,
        holder=as_text(reply[1]),
        expires_in=max(int(reply[2]), 0) / 1000,
    )


def renew_lease(ctx: PlanContext, lease: Lease) -> Plan[bool]:
    """True while ``lease.token`` is still the thread's lease; False once taken over."""
    return bool((yield _lease_script(ctx, lease, "renew", lease.token)))


def release_lease(ctx: PlanContext, lease: Lease) -> Plan[bool]:
    """Give the lease up early; False if it was no longer ours."""
    return bool((yield _lease_script(ctx, lease, "release", lease.token)))
