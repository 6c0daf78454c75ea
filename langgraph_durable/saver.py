"""``RedisSaver``: the synchronous saver. It only drives plans (``base.py`` holds the contract).

Owns its client's life and the four ways in for a ``redis.Redis`` / ``RedisCluster``
client: ``drive`` runs a plan through the driver's sync loop (``io/driver.py``); the
async methods run a whole plan in a worker thread (``asyncio.to_thread``, which carries
the caller's leases along).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import redis
import redis.cluster

from langgraph_durable.base import BaseRedisSaver
from langgraph_durable.core.ops import Plan
from langgraph_durable.io import compat, connect, kept, wire
from langgraph_durable.io.driver import Driver
from langgraph_durable.io.loops import Steps, run_calls, run_to_end

SyncClient = redis.Redis | redis.cluster.RedisCluster
T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class RedisSaver(Driver, BaseRedisSaver):
    """A LangGraph checkpointer on plain Redis (6.2+, Valkey, Redis Cluster, Sentinel).

    Give it a client or a URL: ``RedisSaver(client)``, ``RedisSaver(url)``,
    ``RedisSaver(redis_url=url, connection_args={...})``, ``RedisSaver(redis_client=client)``
    (langgraph-checkpoint-redis's shapes), or use ``RedisSaver.from_conn_string(url)``.
    A handed-in client must use ``decode_responses=False``. As a context manager
    (``with RedisSaver(redis_url=url) as saver``) it is set up on entry and closes the
    client it made on exit. Async methods run the sync ones in a worker thread; use
    ``AsyncRedisSaver`` in async applications.

    Args:
        client: a ``redis.Redis`` / ``redis.cluster.RedisCluster``, or a URL
            (``redis://``, ``rediss://``, ``unix://``, ``redis+sentinel://``).
        redis_url: the URL, by keyword.
        redis_client: the client, by keyword.
        connection_args: redis-py options for the client made from a URL (TLS files,
            timeouts, credentials, ``retry``...); checked, see ``from_conn_string``.
        cluster: the URL is a Redis Cluster node.
        **options: the saver's options (``SaverOptions``: ``key_prefix``, ``ttl``,
            ``refresh_on_read``, ``keep_last``, ``signing_key``...).

    Raises:
        ConfigurationError: no client or URL, or more than one; a client that cannot
            work; an option or client option that is wrong, naming it.
    """

    _wire = staticmethod(wire.round_trip)
    _wire_call = staticmethod(wire.call)

    def __init__(
        self,
        client: SyncClient | str | None = None,
        *,
        redis_url: str | None = None,
        redis_client: SyncClient | None = None,
        connection_args: Mapping[str, Any] | None = None,
        cluster: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._use_client(
            client,
            asyncio=False,
            redis_url=redis_url,
            redis_client=redis_client,
            connection_args=connection_args,
            cluster=cluster,
        )

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        url: str | None = None,
        *,
        redis_url: str | None = None,
        redis_client: SyncClient | None = None,
        connection_args: Mapping[str, Any] | None = None,
        cluster: bool = False,
        **kwargs: Any,
    ) -> Iterator[RedisSaver]:
        """A ready saver on a new connection to ``url`` (or ``redis_url=``), closed on
        exit; or on ``redis_client=``, which stays open.

        Keywords that name saver options (``key_prefix``, ``ttl``, ``refresh_on_read``,
        ``signing_key``, ``keep_last``, ``serde``, ``wait_for_replicas``,
        ``replica_timeout``...) configure the saver; every other keyword joins
        ``connection_args`` for redis-py's ``from_url``: ``ssl_ca_certs``,
        ``ssl_certfile``, ``ssl_keyfile`` (for ``rediss://`` URLs), ``socket_timeout``,
        ``username``, ``password``, ``retry``... A keyword redis-py does not take raises
        ``ConfigurationError`` naming it. Unless given ``retry=``, the client retries
        dropped connections (``deadlines.client_retry``); unless given
        ``socket_timeout``, ``socket_connect_timeout`` or ``socket_keepalive``, a reply
        later than 10 s (plus ``replica_timeout`` with ``wait_for_replicas``) or a
        connection not made within 5 s is a lost server for ``failover_timeout``
        (``deadlines.py``). ``cluster=True``
        connects to a Redis Cluster; a ``redis+sentinel://`` URL to the master its
        sentinels name.
        """
        options, connection_args = compat.conn_string_arguments(cls, kwargs, connection_args)
        with cls(
            url,
            redis_url=redis_url,
            redis_client=redis_client,
            connection_args=connection_args,
            cluster=cluster,
            **options,
        ) as saver:
            yield saver

    def __enter__(self) -> Self:
        """Set up (``setup()``); a failure closes the client the saver made."""
        try:
            self.setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client if the saver made it (from a URL); a handed-in one stays open
        (the connections the saver kept go back to its pool)."""
        kept.give_back(self.client)
        if self._owns_client:
            for sentinel in connect.sentinel_clients(self.client):
                sentinel.close()
            self.client.close()

    def setup(self) -> None:
        """Load the Lua scripts (idempotent) and warn once if Redis may evict the saver's
        keys. Storage needs no other set-up."""
        self._run(self._setup_steps())

    # -- the ways in ---------------------------------------------------------------------
    def drive_iter(self, plan: Plan[Any]) -> Iterator[Any]:
        return run_calls(self._steps(plan), self.failover)

    def drive(self, plan: Plan[T]) -> T:
        return self._run(self._steps(plan))

    def _run(self, steps: Steps[T]) -> T:
        return run_to_end(steps, self.failover)

    async def adrive(self, plan: Plan[T]) -> T:
        return await asyncio.to_thread(self.drive, plan)

    async def adrive_iter(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(self.drive_iter(plan))):
            yield item
