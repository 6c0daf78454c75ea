"""The connections a plain pool keeps checked out between round trips (``wire.py``).

Owns which connections are kept: one whose round trip ended cleanly (every reply read)
is kept for the next one (``Idle``: at most ``IDLE_MAX`` per pool, and no more than a
sixteenth of it) instead of going back through the pool's checkout, whose "has it
unread data" probe is a failed non-blocking read each time; only where that skips
nothing the pool does (``idle_of``). ``taken`` empties the stack, for a saver closing
and for a round trip that learnt the server they reach is gone or no longer the one to
use (``wire.py``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import redis
import redis.asyncio

IDLE_MAX = 4  # connections kept per pool between round trips, at most 1/16 of the pool


class Idle:
    """The connections kept checked out of one pool between round trips (a stack: the
    warmest first), held by the pool itself (``_ATTRIBUTE``), so they go when it goes.
    List ``append``/``pop`` are atomic, so threads and tasks share it."""

    def __init__(self, limit: int) -> None:
        self.pid = os.getpid()
        self.limit = limit
        self.connections: list[Any] = []


_ATTRIBUTE = "_langgraph_durable_idle"
_OWNED = "_langgraph_durable_owned"
_PLAIN_POOLS = (redis.ConnectionPool, redis.asyncio.ConnectionPool)
_BLOCKING_POOLS = (redis.BlockingConnectionPool, redis.asyncio.BlockingConnectionPool)
_idle_lock = threading.Lock()


def _new_lock_in_child() -> None:  # a fork while another thread held the lock
    global _idle_lock
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


def own(pool: Any) -> None:
    """Mark ``pool`` as one a saver made for itself (``connect.py``): its only user."""
    pool.__dict__[_OWNED] = True


def idle_of(pool: Any) -> Idle | None:
    """The kept connections of ``pool``, or None where it must not keep any: only a
    plain pool (a blocking one someone else shares makes its callers wait for what is
    kept; a Sentinel one asks Sentinel for the master at checkout), or a blocking one a
    saver made for itself (its round trips take a kept connection before they would
    wait, and at most a sixteenth is kept: a round trip that waits has the others to
    wait for), big enough (redis-py 8's default is 100), without client-side caching or
    a credential provider (whose re-authentication happens when a connection goes back
    to the pool)."""
    idle = pool.__dict__.get(_ATTRIBUTE, False)
    if idle is False:
        limit = min(IDLE_MAX, (getattr(pool, "max_connections", 0) or 0) // 16)
        kwargs = getattr(pool, "connection_kwargs", {})
        owned_blocking = type(pool) in _BLOCKING_POOLS and pool.__dict__.get(_OWNED, False)
        keep = (
            limit > 0
            and (type(pool) in _PLAIN_POOLS or owned_blocking)
            and getattr(pool, "cache", None) is None
            and kwargs.get("credential_provider") is None
        )
        with _idle_lock:
            idle = pool.__dict__.setdefault(_ATTRIBUTE, Idle(limit) if keep else None)
    if idle is not None and idle.pid != os.getpid():  # a forked child: the pool resets
        idle.pid, idle.connections = os.getpid(), []
    return idle  # type: ignore[no-any-return]


def reuse(idle: Idle | None) -> Any:
    """A kept connection, or None."""
    if idle is None:
        return None
    try:
        return idle.connections.pop()
    except IndexError:  # none left
        return None


def moved(conn: Any) -> bool:
    """Whether the server asked ``conn`` to reconnect (redis-py 8's maintenance
    notifications): what the pool's release() would have disconnected."""
    return bool(getattr(conn, "should_reconnect", _never)())


def _never() -> bool:  # a connection class without should_reconnect never moved
    return False


def keep(idle: Idle | None, conn: Any) -> bool:
    """Keep ``conn`` (its round trip ended cleanly) if there is room."""
    if idle is None:
        return False
    with _idle_lock:
        if len(idle.connections) >= idle.limit:
            return False
        idle.connections.append(conn)
        return True


def _of_client(client: Any) -> tuple[Any, list[Any]]:
    """``client``'s pool and the connections it kept, taken one by one (each pop is
    atomic: none is handed to a round trip and back to the pool at once)."""
    pool = getattr(client, "connection_pool", None)
    idle = getattr(pool, "__dict__", {}).get(_ATTRIBUTE)
    if not isinstance(idle, Idle) or idle.pid != os.getpid():
        return pool, []
    return pool, taken(idle)


def taken(idle: Idle | None) -> list[Any]:
    """Take every kept connection of ``idle`` out of it."""
    out = []
    while (conn := reuse(idle)) is not None:
        out.append(conn)
    return out


def give_back(client: redis.Redis) -> None:
    """Return the connections kept for ``client``'s pool to it (a saver closing)."""
    pool, kept = _of_client(client)
    for conn in kept:
        pool.release(conn)


async def agive_back(client: redis.asyncio.Redis) -> None:
    """``give_back`` for an asyncio client."""
    pool, kept = _of_client(client)
    for conn in kept:
        await pool.release(conn)
