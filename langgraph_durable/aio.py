"""``AsyncRedisSaver``: the asyncio saver. It only drives plans (``base.py`` holds the contract).

Owns its client's life and the four ways in for a ``redis.asyncio`` client: ``adrive``
runs a plan through the driver's asyncio loop (``io/driver.py``); the sync methods run a whole plan on the saver's event loop from
another thread (carrying the caller's leases), and refuse at once where that could
never finish (``EventLoopError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import redis.asyncio
import redis.asyncio.cluster

from langgraph_durable.base import BaseRedisSaver
from langgraph_durable.core import fencing
from langgraph_durable.core.errors import EventLoopError
from langgraph_durable.core.ops import Plan
from langgraph_durable.io import compat, connect, kept, wire
from langgraph_durable.io.driver import Driver
from langgraph_durable.io.loops import Steps, arun_calls, arun_to_end

AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster
T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class AsyncRedisSaver(Driver, BaseRedisSaver):
    """The asyncio twin of ``RedisSaver``, on ``redis.asyncio`` clients.

    Made as ``RedisSaver`` is (a client or URL first, ``redis_url=``, ``redis_client=``,
    ``connection_args=``, ``cluster=``, the saver's options), and ``max_connections``:
    the size of the blocking pool of a client it makes (default 100). As an async
    context manager (``async with AsyncRedisSaver(redis_url=url) as saver``) it is set
    up on entry and closes the client it made on exit. It may be made outside a running
    loop; ``asetup()`` binds it to the loop it runs on.

    Its sync methods (used by ``graph.invoke`` and ``graph.get_state``) run the async
    ones on the saver's event loop and must be called from another thread.
    """

    _wire = staticmethod(wire.around_trip)
    _wire_call = staticmethod(wire.acall)

    def __init__(
        self,
        client: AsyncClient | str | None = None,
        *,
        redis_url: str | None = None,
        redis_client: AsyncClient | None = None,
        connection_args: Mapping[str, Any] | None = None,
        cluster: bool = False,
        max_connections: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._use_client(
            client,
            asyncio=True,
            redis_url=redis_url,
            redis_client=redis_client,
            connection_args=connection_args,
            cluster=cluster,
            max_connections=max_connections,
        )
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        url: str | None = None,
        *,
        redis_url: str | None = None,
        redis_client: AsyncClient | None = None,
        connection_args: Mapping[str, Any] | None = None,
        cluster: bool = False,
        max_connections: int | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AsyncRedisSaver]:
        """A ready saver on a new connection pool to ``url`` (or ``redis_url=``), closed
        on exit; or on ``redis_client=``, which stays open.

        Many concurrent graphs share the pool: a call waits for a free connection (up to
        20 s, or ``timeout=``) rather than failing, as redis-py's default asyncio pool does
        past its size. Keywords are split as in ``RedisSaver.from_conn_string``: saver
        options configure the saver, every other keyword (``ssl_ca_certs``,
        ``socket_timeout``, ``username``, ``password``, ``retry``...) joins
        ``connection_args`` for redis-py, and one redis-py does not take raises
        ``ConfigurationError`` naming it.
        """
        options, connection_args = compat.conn_string_arguments(cls, kwargs, connection_args)
        async with cls(
            url,
            redis_url=redis_url,
            redis_client=redis_client,
            connection_args=connection_args,
            cluster=cluster,
            max_connections=max_connections,
            **options,
        ) as saver:
            yield saver

    async def __aenter__(self) -> Self:
        """Set up (``asetup()``); a failure closes the client the saver made."""
        try:
            await self.asetup()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client if the saver made it (from a URL); a handed-in one stays open
        (the connections the saver kept go back to its pool)."""
        await kept.agive_back(self.client)
        if self._owns_client:
            for sentinel in connect.sentinel_clients(self.client):
                await sentinel.aclose()
            await self.client.aclose()

    async def asetup(self) -> None:
        """Load the Lua scripts (idempotent) and warn once if Redis may evict the saver's
        keys; binds the saver to the running loop. Storage needs no other set-up."""
        self.loop = asyncio.get_running_loop()
        await self._arun(self._setup_steps())

    def setup(self) -> Coroutine[Any, Any, None] | None:  # type: ignore[override]
        """``asetup()`` from another thread, while the saver's loop runs. Called on a
        running loop's own thread it returns ``asetup()``'s coroutine instead, so
        ``await saver.setup()`` works as with langgraph-checkpoint-redis."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and (self.loop is None or running is self.loop):
            return self.asetup()
        self._run_sync(self.asetup())
        return None

    # -- the ways in ---------------------------------------------------------------------
    async def _arun(self, steps: Steps[T]) -> T:
        return await arun_to_end(steps, self.failover)

    async def adrive(self, plan: Plan[T]) -> T:
        return await self._arun(self._steps(plan))

    def adrive_iter(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        return arun_calls(self._steps(plan), self.failover, [])

    def drive(self, plan: Plan[T]) -> T:
        return self._run_sync(self.adrive(plan))

    def drive_iter(self, plan: Plan[Any]) -> Iterator[Any]:
        async def collect() -> list[Any]:
            return [item async for item in self.adrive_iter(plan)]

        yield from self._run_sync(collect())

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the saver's loop from another thread and wait for its result.

        Raises EventLoopError at once where it could never finish: no loop yet, a loop
        that is closed or not running (nothing would ever run the call), or a call from
        the loop's own thread (it would wait for itself)."""
        loop = self.loop
        problem = _loop_problem(loop)
        if problem is not None or loop is None:
            coro.close()
            raise EventLoopError(problem or "no event loop")
        # The coroutine runs on the loop's thread: carry the caller's leases along.
        held = fencing.current_leases()
        return asyncio.run_coroutine_threadsafe(fencing.in_lease_context(held, coro), loop).result()


def _loop_problem(loop: asyncio.AbstractEventLoop | None) -> str | None:
    """Why a sync call cannot run on ``loop`` from the calling thread, or None."""
    if loop is None:
        return (
            "AsyncRedisSaver has no event loop yet: create it inside a running loop "
            "or call asetup() first"
        )
    if loop.is_closed() or not loop.is_running():
        return (
            f"the event loop of this AsyncRedisSaver is "
            f"{'closed' if loop.is_closed() else 'not running'}, so a synchronous call would "
            "wait forever: make synchronous calls from another thread while the loop the "
            "saver was set up on runs, use the async methods, or use RedisSaver"
        )
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return (
            "Synchronous calls to AsyncRedisSaver are only allowed from a different "
            "thread. From the main thread, use the async interface (e.g. "
            "`await graph.ainvoke(...)`), or use RedisSaver."
        )
    return None
