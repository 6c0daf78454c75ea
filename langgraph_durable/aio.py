"""``AsyncRedisSaver``: the asyncio shell. It only drives the plans of ``core.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import redis.asyncio
import redis.asyncio.cluster
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_durable import connect, lease, scripts
from langgraph_durable.base import (
    NOSCRIPT,
    BaseRedisSaver,
    batch_commands,
    batch_replies,
    check_client,
    script_reply,
)
from langgraph_durable.core import (
    Batch,
    Command,
    Emit,
    Plan,
    ScanKeys,
    Script,
    VerifyReport,
    WaitReplicas,
)
from langgraph_durable.errors import EventLoopError
from langgraph_durable.resign import ResignReport, resign_threads

AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster
R = TypeVar("R")


class AsyncRedisSaver(BaseRedisSaver):
    """The asyncio twin of ``RedisSaver``, on ``redis.asyncio`` clients.

    Its sync methods (used by ``graph.invoke`` and ``graph.get_state``) run the async
    ones on the saver's event loop and must be called from another thread.
    """

    def __init__(self, client: AsyncClient, **options: Any) -> None:
        check_client(client, asyncio=True)
        super().__init__(**options)
        self.client = client
        self.cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        self._scripts = scripts.ScriptSet()  # until asetup() knows the server
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, url: str, *, cluster: bool = False, max_connections: int = 100, **kwargs: Any
    ) -> AsyncIterator[AsyncRedisSaver]:
        """A ready saver on a new connection pool to ``url``, closed on exit.

        Many concurrent graphs share the pool: a call waits for a free connection (up to
        20 s, or ``timeout=``) rather than failing, as redis-py's default asyncio pool does
        past its size. Keywords are split as in ``RedisSaver.from_conn_string``: saver
        options configure the saver, every other keyword (``ssl_ca_certs``,
        ``socket_timeout``, ``username``, ``password``, ``retry``...) goes to redis-py, and
        one redis-py does not take raises ``ConfigurationError`` naming it.
        """
        options, client_options = connect.split_options(cls, kwargs)
        client = connect.async_client(
            cls, url, cluster=cluster, max_connections=max_connections, options=client_options
        )
        try:
            saver = cls(client, **options)
            await saver.asetup()
            yield saver
        finally:
            await client.aclose()

    async def asetup(self) -> None:
        """Load the Lua scripts (idempotent). Storage needs no other set-up."""
        self.loop = asyncio.get_running_loop()
        try:
            version = scripts.server_version(await self.client.info("server"))
        except redis.exceptions.ResponseError:  # INFO not allowed (ACL): assume Redis 6.2
            version = None
        self._scripts = scripts.ScriptSet.for_server(version, cluster=self.cluster)
        await self._load_scripts()
        await self._acheck_eviction()

    async def _load_scripts(self) -> None:
        for source in self._scripts.sources():
            await self.client.script_load(source)  # type: ignore[attr-defined]

    def setup(self) -> None:
        self._run_sync(self.asetup())

    # -- driving plans ------------------------------------------------------------------
    async def _execute(self, op: Any) -> Any:
        if isinstance(op, Script):
            command = self._scripts.command(op.name, op.keys, op.args)
            for first_try in (True, False):
                try:
                    reply: Any = await self.client.execute_command(*command)
                except redis.exceptions.ResponseError as exc:
                    reply = exc
                reply = script_reply(self.core, op, reply, first_try=first_try)
                if reply is not NOSCRIPT:
                    return reply
                await self._load_scripts()
        if isinstance(op, Command):
            return await self.client.execute_command(*op.args)
        if isinstance(op, Batch):
            commands = batch_commands(op, self._scripts)
            for first_try in (True, False):
                pipe = self.client.pipeline(transaction=op.atomic)
                for command in commands:
                    pipe.execute_command(*command)
                replies = await pipe.execute(raise_on_error=False)
                result = batch_replies(self.core, op, replies, first_try=first_try)
                if result is not None:
                    return result
                await self._load_scripts()
        if isinstance(op, WaitReplicas):
            wait = ("WAIT", op.replicas, op.timeout_ms)
            if self.cluster:  # WAIT has no key: send it to the node the write went to
                node = self.client.get_node_from_key(op.key)  # type: ignore[union-attr]
                return await self.client.execute_command(*wait, target_nodes=node)  # type: ignore[call-arg]
            return await self.client.execute_command(*wait)
        if isinstance(op, ScanKeys):
            return [key async for key in self.client.scan_iter(match=op.pattern, count=1000)]
        raise TypeError(f"unknown operation {op!r}")

    async def _drive_iter(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        reply = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration:
                return
            if isinstance(op, Emit):
                reply = None
                yield op.item
            else:
                reply = await self._execute(op)

    async def _drive(self, plan: Plan[Any]) -> Any:
        reply = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            reply = await self._execute(op)

    def _run_sync(self, coro: Coroutine[Any, Any, R]) -> R:
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
        held = lease.current_leases()
        return asyncio.run_coroutine_threadsafe(lease.in_lease_context(held, coro), loop).result()

    # the ledger drives its plans through these, from sync and from async code
    def _drive_sync(self, plan: Plan[Any]) -> Any:
        return self._run_sync(self._drive(plan))

    async def _drive_async(self, plan: Plan[Any]) -> Any:
        return await self._drive(plan)

    # -- the checkpointer contract --------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._drive(self.core.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._drive_iter(
            self.core.list(config, filter=filter, before=before, limit=limit)
        ):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._drive(self.core.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._drive(self.core.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._drive(self.core.delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._drive(self.core.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._drive(self.core.copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._drive(self.core.prune(thread_ids, strategy=strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._drive(self.core.get_delta_channel_history(config, channels))

    async def averify(self, thread_id: str) -> VerifyReport:
        """Check every record of a thread; changes nothing."""
        return await self._drive(self.core.verify(thread_id))

    async def aresign(
        self, thread_id: str | None = None, *, from_unsigned: bool = False
    ) -> list[ResignReport]:
        """See ``RedisSaver.resign``."""
        return await self._drive(resign_threads(self.core, thread_id, from_unsigned=from_unsigned))

    # -- sync twins: the async calls on the saver's loop, from another thread -------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run_sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [i async for i in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._run_sync(collect())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run_sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run_sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run_sync(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run_sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run_sync(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run_sync(self.aprune(thread_ids, strategy=strategy))

    def verify(self, thread_id: str) -> VerifyReport:
        return self._run_sync(self.averify(thread_id))

    def resign(
        self, thread_id: str | None = None, *, from_unsigned: bool = False
    ) -> list[ResignReport]:
        return self._run_sync(self.aresign(thread_id, from_unsigned=from_unsigned))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._run_sync(self.aget_delta_channel_history(config=config, channels=channels))


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
