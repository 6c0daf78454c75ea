"""``RedisSaver``: the synchronous shell. It only drives plans (``base.py`` holds the contract).

Owns the four drivers for a ``redis.Redis`` / ``RedisCluster`` client: ``drive`` makes
each call ``shell.py`` yields; the async methods run a whole plan in a worker thread
(``asyncio.to_thread``, which carries the caller's leases along).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
import redis.cluster

from langgraph_durable import connect, scripts
from langgraph_durable.base import BaseRedisSaver
from langgraph_durable.ops import Emit, Plan
from langgraph_durable.shell import PlanShell, Steps

SyncClient = redis.Redis | redis.cluster.RedisCluster
T = TypeVar("T")


class RedisSaver(PlanShell, BaseRedisSaver):
    """A LangGraph checkpointer on plain Redis (6.2+, Valkey, Redis Cluster).

    Pass an existing ``redis.Redis`` or ``redis.cluster.RedisCluster`` (created with
    ``decode_responses=False``), or use ``RedisSaver.from_conn_string(url)``.
    Async methods run the sync ones in a worker thread; use ``AsyncRedisSaver`` in
    async applications.
    """

    def __init__(self, client: SyncClient, **options: Any) -> None:
        connect.check_client(client, asyncio=False)
        super().__init__(**options)
        self.client = client
        self.cluster = isinstance(client, redis.cluster.RedisCluster)
        self._scripts = scripts.ScriptSet()  # until setup() knows the server

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, url: str, *, cluster: bool = False, **kwargs: Any
    ) -> Iterator[RedisSaver]:
        """A ready saver on a new connection to ``url``, closed on exit.

        Keywords that name saver options (``key_prefix``, ``ttl``, ``signing_key``,
        ``keep_last``, ``serde``, ``wait_for_replicas``, ``replica_timeout``) configure the
        saver; every other keyword goes to redis-py's ``from_url``: ``ssl_ca_certs``,
        ``ssl_certfile``, ``ssl_keyfile`` (for ``rediss://`` URLs), ``socket_timeout``,
        ``username``, ``password``, ``retry``... A keyword redis-py does not take raises
        ``ConfigurationError`` naming it. Unless given ``retry=``, the client retries
        dropped connections and timeouts (see ``connect.client_retry``). ``cluster=True``
        connects to a Redis Cluster.
        """
        options, client_options = connect.split_options(cls, kwargs)
        client = connect.sync_client(cls, url, cluster=cluster, options=client_options)
        try:
            saver = cls(client, **options)
            saver.setup()
            yield saver
        finally:
            client.close()

    def setup(self) -> None:
        """Load the Lua scripts (idempotent) and warn once if Redis may evict the saver's
        keys. Storage needs no other set-up."""
        self._run(self._setup_steps())

    def _scan_keys(self, pattern: str) -> list[Any]:
        return list(self.client.scan_iter(match=pattern, count=1000))

    # -- the drivers ---------------------------------------------------------------------
    def _drive_steps(self, steps: Steps[T]) -> Iterator[Any]:
        """Make each call ``steps`` yields, yield each emitted item, return its result."""
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            reply, error = None, None
            if isinstance(step, Emit):
                yield step.item
                continue
            try:
                reply = step()
            except Exception as exc:  # noqa: BLE001 - handed to the plan's shell step
                error = exc

    def drive_iter(self, plan: Plan[Any]) -> Iterator[Any]:
        return self._drive_steps(self._steps(plan))

    def drive(self, plan: Plan[T]) -> T:
        return self._run(self._steps(plan))

    def _run(self, steps: Steps[T]) -> T:
        items = self._drive_steps(steps)
        while True:
            try:
                next(items)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]

    async def adrive(self, plan: Plan[T]) -> T:
        return await asyncio.to_thread(self.drive, plan)

    async def adrive_iter(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(self.drive_iter(plan))):
            yield item
