"""``RedisSaver``: the synchronous shell. It only drives the plans of ``core.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import redis
import redis.cluster
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_durable import connect, scripts
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
from langgraph_durable.resign import ResignReport, resign_threads

SyncClient = redis.Redis | redis.cluster.RedisCluster


class RedisSaver(BaseRedisSaver):
    """A LangGraph checkpointer on plain Redis (6.2+, Valkey, Redis Cluster).

    Pass an existing ``redis.Redis`` or ``redis.cluster.RedisCluster`` (created with
    ``decode_responses=False``), or use ``RedisSaver.from_conn_string(url)``.
    Async methods run the sync ones in a worker thread; use ``AsyncRedisSaver`` in
    async applications.
    """

    def __init__(self, client: SyncClient, **options: Any) -> None:
        check_client(client, asyncio=False)
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
        dropped connections and timeouts (see ``base.client_retry``). ``cluster=True``
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
        """Load the Lua scripts (idempotent). Storage needs no other set-up."""
        try:
            version = scripts.server_version(self.client.info("server"))
        except redis.exceptions.ResponseError:  # INFO not allowed (ACL): assume Redis 6.2
            version = None
        self._scripts = scripts.ScriptSet.for_server(version, cluster=self.cluster)
        self._load_scripts()
        self._check_eviction()

    def _load_scripts(self) -> None:
        for source in self._scripts.sources():
            self.client.script_load(source)  # type: ignore[attr-defined]

    # -- driving plans ------------------------------------------------------------------
    def _execute(self, op: Any) -> Any:
        if isinstance(op, Script):
            command = self._scripts.command(op.name, op.keys, op.args)
            for first_try in (True, False):
                try:
                    reply: Any = self.client.execute_command(*command)
                except redis.ResponseError as exc:
                    reply = exc
                reply = script_reply(self.core, op, reply, first_try=first_try)
                if reply is not NOSCRIPT:
                    return reply
                self._load_scripts()
        if isinstance(op, Command):
            return self.client.execute_command(*op.args)
        if isinstance(op, Batch):
            commands = batch_commands(op, self._scripts)
            for first_try in (True, False):
                pipe = self.client.pipeline(transaction=op.atomic)
                for command in commands:
                    pipe.execute_command(*command)
                replies = pipe.execute(raise_on_error=False)
                result = batch_replies(self.core, op, replies, first_try=first_try)
                if result is not None:
                    return result
                self._load_scripts()
        if isinstance(op, WaitReplicas):
            wait = ("WAIT", op.replicas, op.timeout_ms)
            if self.cluster:  # WAIT has no key: send it to the node the write went to
                node = self.client.get_node_from_key(op.key)  # type: ignore[union-attr]
                return self.client.execute_command(*wait, target_nodes=node)  # type: ignore[call-arg]
            return self.client.execute_command(*wait)
        if isinstance(op, ScanKeys):
            return list(self.client.scan_iter(match=op.pattern, count=1000))
        raise TypeError(f"unknown operation {op!r}")

    def _drive_iter(self, plan: Plan[Any]) -> Iterator[Any]:
        reply = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(op, Emit):
                reply = None
                yield op.item
            else:
                reply = self._execute(op)

    def _drive(self, plan: Plan[Any]) -> Any:
        it = self._drive_iter(plan)
        while True:
            try:
                next(it)
            except StopIteration as stop:
                return stop.value

    # the ledger drives its plans through these, from sync and from async code
    _drive_sync = _drive

    async def _drive_async(self, plan: Plan[Any]) -> Any:
        return await asyncio.to_thread(self._drive, plan)

    # -- the checkpointer contract --------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._drive(self.core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._drive_iter(
            self.core.list(config, filter=filter, before=before, limit=limit)
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._drive(self.core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._drive(self.core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._drive(self.core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._drive(self.core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._drive(self.core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._drive(self.core.prune(thread_ids, strategy=strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._drive(self.core.get_delta_channel_history(config, channels))

    def verify(self, thread_id: str) -> VerifyReport:
        """Check every record of a thread; changes nothing."""
        return self._drive(self.core.verify(thread_id))

    def resign(
        self, thread_id: str | None = None, *, from_unsigned: bool = False
    ) -> list[ResignReport]:
        """Re-sign records in place under the newest ``signing_key`` and format.

        Completes a key rotation: with ``signing_key=[new, old]``, every record of the
        thread (every thread of this key prefix when ``thread_id`` is None) that verifies
        under ``new`` or ``old`` is rewritten signed by ``new``; afterwards ``old`` can be
        dropped. Records written by langgraph-durable 0.1 are rewritten in the current
        format, which binds the key prefix.

        Args:
            thread_id: one thread, or None for every thread.
            from_unsigned: also sign records that carry only a checksum (written before
                ``signing_key`` was set). Only do this while you trust what Redis holds:
                a checksum proves no author.

        Returns:
            One ``ResignReport`` per thread: records re-signed, already current, and
            skipped (they do not verify; left exactly as they were).
        """
        return self._drive(resign_threads(self.core, thread_id, from_unsigned=from_unsigned))

    # -- async twins: the sync calls in a worker thread ------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def averify(self, thread_id: str) -> VerifyReport:
        return await asyncio.to_thread(self.verify, thread_id)

    async def aresign(
        self, thread_id: str | None = None, *, from_unsigned: bool = False
    ) -> list[ResignReport]:
        """``resign`` in a worker thread."""
        return await asyncio.to_thread(self.resign, thread_id, from_unsigned=from_unsigned)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )
