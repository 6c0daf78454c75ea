"""The deadlines and retries of the redis-py clients a saver makes from a URL.

Owns the socket deadlines (``with_deadlines``: connect, read, TCP keepalive) and how the
savers' own clients retry (``client_retry``). Without deadlines a server that stops
answering without closing the connection (a paused VM, a network partition, a machine
gone without a TCP reset) blocks a round trip forever: with them, a reply that does not
come within ``socket_timeout`` is a lost server for the saver's failover budget
(``failover.py``), which then sends the round trip again (on Sentinel, to the master the
sentinels name now) or, past ``failover_timeout``, raises ``FailoverTimeoutError``. Each
default is overridable by its redis-py keyword (``from_conn_string(...,
socket_timeout=30)``); a client handed in keeps its own, and one without a read deadline
is warned about once, as the saver takes it (``warn_without_deadline``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("langgraph_durable")

# Deadlines of the clients a saver makes (from a URL; each overridable by its keyword).
# Without them a server that stops answering without closing the connection (a paused
# VM, a partition, a machine gone without a TCP reset) blocks a round trip forever.
CONNECT_TIMEOUT = 5.0  # a TCP (and TLS) handshake: seconds even across regions
# A reply: the slowest a saver waits for is a large checkpoint's write or read (tens of
# ms on a busy server); a reply later than this is a server lost for the failover
# budget. WAIT (wait_for_replicas) gets replica_timeout on top (``read_timeout``).
READ_TIMEOUT = 10.0
# TCP keepalive on every connection, so an idle pooled connection to a machine that
# vanished is found dead within about 20 s instead of the kernel's two hours.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES = 10, 5, 2


def read_timeout(replica_timeout: float = 0.0) -> float:
    """The default ``socket_timeout``: ``READ_TIMEOUT``, longer by the replica wait a
    write's WAIT may take in the same round trip."""
    return READ_TIMEOUT + replica_timeout


def with_deadlines(options: Mapping[str, Any], replica_timeout: float = 0.0) -> dict[str, Any]:
    """``options`` with the saver's default socket deadlines and keepalive, for every
    one the caller did not set."""
    import socket

    keepalive = {
        getattr(socket, name): value
        for name, value in (
            ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
            ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
            ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        )
        if hasattr(socket, name)  # Linux; macOS and Windows keep their own timings
    }
    defaults = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": read_timeout(replica_timeout),
        "socket_keepalive": True,
        "socket_keepalive_options": keepalive,
    }
    return {**defaults, **options}


def client_retry(*, asyncio: bool) -> Any:
    """What the savers' own clients do on a dropped connection: reconnect and resend, up
    to 10 times with jittered backoff (10 ms doubling to 1 s). Safe because every write
    the saver makes is idempotent: resending a command that did run (its reply was lost)
    stores the same bytes under the same fields again. A timeout is not retried here: a
    server that stopped answering goes straight to the saver's failover budget
    (``failover.py``), which counts the time already waited.
    (redis-py's ``from_url`` clients do not retry unless given a ``Retry``.)"""
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    lost = (RedisConnectionError,)
    if asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry

        return AsyncRetry(
            ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=10, supported_errors=lost
        )
    from redis.retry import Retry

    return Retry(
        ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=10, supported_errors=lost
    )


def no_retry(*, asyncio: bool) -> Any:
    from redis.backoff import NoBackoff

    if asyncio:
        from redis.asyncio.retry import Retry as AsyncRetry

        return AsyncRetry(NoBackoff(), retries=0)
    from redis.retry import Retry

    return Retry(NoBackoff(), retries=0)


def client_options(
    options: Mapping[str, Any], *, asyncio: bool, replica_timeout: float = 0.0
) -> dict[str, Any]:
    """``options`` with the saver's default Retry and deadlines, each unless the caller
    passed its own."""
    return {"retry": client_retry(asyncio=asyncio), **with_deadlines(options, replica_timeout)}


def read_deadline(client: Any) -> tuple[bool, float | None]:
    """(whether it was found, the ``socket_timeout``) of a redis-py client's connections:
    a plain or Sentinel client's pool, a cluster client's nodes."""
    for holder in (
        getattr(client, "connection_pool", None),
        getattr(client, "nodes_manager", None),
        client,
    ):
        kwargs = getattr(holder, "connection_kwargs", None)
        if isinstance(kwargs, Mapping):
            return True, kwargs.get("socket_timeout")
    return False, None


def warn_without_deadline(client: Any) -> None:
    """Warn if a client handed to a saver waits for a reply forever (no ``socket_timeout``:
    redis-py's default before 8.0): a Redis that stops answering would block a run."""
    found, timeout = read_deadline(client)
    if found and timeout is None:
        logger.warning(
            "langgraph-durable: the Redis client passed has no socket_timeout: a Redis that "
            "stops answering without closing the connection (a partition, a paused VM) "
            "blocks a run forever. Give it socket_timeout=%.0f (what the saver's own "
            "clients use) and socket_keepalive=True, or pass a URL",
            READ_TIMEOUT,
        )
