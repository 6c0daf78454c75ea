"""The checkpointer contract, written once for both savers over ``drive`` / ``adrive``.

Owns every public method of ``RedisSaver`` and ``AsyncRedisSaver``, sync and async: each
builds the plan of ``SaverCore`` and hands it to the shell. Rules it keeps:
  * A method here never does I/O and never knows which shell runs it. A shell implements
    four drivers: ``drive(plan)`` and ``drive_iter(plan)`` for sync callers,
    ``adrive(plan)`` and ``adrive_iter(plan)`` for async ones (``saver.py``, ``aio.py``).
  * ``drive`` / ``adrive`` are public: the ledger, the lease, the CLI and anyone with a
    plan of their own (``repair_plan``) drive through them, never through a private name.
  * The semantics are LangGraph's (``InMemorySaver`` is the reference): first write wins
    for regular pending writes, special channels overwrite, ``writes_sort_key`` order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_durable import lease as leases
from langgraph_durable.core.incidents import Acknowledgement
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.reports import VerifyReport
from langgraph_durable.core.resign import ResignReport, resign_threads
from langgraph_durable.options import DEFAULT_KEY_PREFIX, SaverOptions

__all__ = ["DEFAULT_KEY_PREFIX", "BaseRedisSaver"]

T = TypeVar("T")


class BaseRedisSaver(SaverOptions):
    """The contract of ``RedisSaver`` and ``AsyncRedisSaver`` (see ``SaverOptions`` for
    the options). Every method raises ``InvalidConfigError`` for a config it cannot use,
    and passes on Redis's own errors (connection, out of memory, ACL) as redis-py
    raised them."""

    # -- the drivers a shell implements -------------------------------------------------
    def drive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to its end from sync code and return its result."""
        raise NotImplementedError

    def drive_iter(self, plan: Plan[Any]) -> Iterator[Any]:
        """Run a listing plan from sync code, yielding each item it emits."""
        raise NotImplementedError

    async def adrive(self, plan: Plan[T]) -> T:
        """Run ``plan`` to its end from async code and return its result."""
        raise NotImplementedError

    def adrive_iter(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        """Run a listing plan from async code, yielding each item it emits."""
        raise NotImplementedError

    # -- reads --------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, with its channel values and pending writes.

        Args:
            config: ``configurable.thread_id``, optional ``checkpoint_ns`` (default "")
                and ``checkpoint_id``.

        Returns:
            With a ``checkpoint_id``: that checkpoint, or None if it does not exist.
            Without: the newest checkpoint of the namespace that verifies completely;
            damaged newer ones are skipped, logged and recorded in ``recovery_report``.
            None for a thread with no checkpoint.

        Raises:
            CheckpointCorruptedError: the named checkpoint is damaged (no fallback when
                a caller names one).
            UnreadableThreadError: every checkpoint failed for a reason that may be this
                reader's configuration (signing key, allowlist), not the data.
        """
        return self.drive(self.core.get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` for async code."""
        return await self.adrive(self.core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first; damaged ones are logged and skipped.

        Args:
            config: a thread (with ``checkpoint_ns``: only that namespace, read a page
                per round trip; with ``checkpoint_id``: only that checkpoint), or None
                for every thread of the key prefix (a SCAN: for operators).
            filter: metadata keys and the values they must equal.
            before: only checkpoints older than this config's ``checkpoint_id``.
            limit: at most this many.

        Raises:
            InvalidConfigError: an option of the wrong type, naming it.
        """
        yield from self.drive_iter(
            self.core.list(config, filter=filter, before=before, limit=limit)
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` for async code."""
        plan = self.core.list(config, filter=filter, before=before, limit=limit)
        async for item in self.adrive_iter(plan):
            yield item

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What each ``DeltaChannel`` in ``channels`` is rebuilt from: the writes along
        the parent chain of ``config``'s checkpoint, oldest first, back to its seed (the
        nearest stored value). One walk for all channels, a page of ancestors per round
        trip.

        Raises:
            CheckpointCorruptedError: a checkpoint on the path is damaged (a history with
                a hole would rebuild a wrong value).
        """
        return self.drive(self.core.get_delta_channel_history(config, channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``get_delta_channel_history`` for async code."""
        return await self.adrive(self.core.get_delta_channel_history(config, channels))

    # -- writes -------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the values of the channels in ``new_versions``, in one
        round trip: it appears whole or not at all.

        Args:
            config: the thread, namespace and parent ``checkpoint_id``.
            checkpoint: the checkpoint; its ``channel_values`` are stored apart, once
                per (channel, version).
            metadata: its metadata (``run_id`` is indexed for ``delete_for_runs``).
            new_versions: the channels whose values changed since the parent.

        Returns:
            The config of the stored checkpoint.

        Raises:
            CheckpointLostError: the parent (or a value it passes on) is gone.
            LeaseHeldError / LeaseLostError: another worker holds the thread, or took it
                over from this one's lease.
            ValueTooLargeError: a record Redis would refuse (``proto-max-bulk-len``).
            NotReplicatedError: fewer than ``wait_for_replicas`` replicas acknowledged.
        """
        return self.drive(self.core.put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` for async code."""
        return await self.adrive(self.core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes to the checkpoint ``config`` names, in one round
        trip. A regular write is kept as first written (a replayed task cannot change
        it); a special channel's (error, interrupt...) is overwritten.

        Raises:
            InvalidConfigError: ``config`` has no ``checkpoint_id``, or a name is no str.
            LeaseHeldError / LeaseLostError, ValueTooLargeError, NotReplicatedError: as
                ``put``.
        """
        self.drive(self.core.put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` for async code."""
        await self.adrive(self.core.put_writes(config, writes, task_id, task_path))

    # -- whole threads --------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        """Delete every key of the thread (checkpoints, writes, ledger, quarantine)."""
        self.drive(self.core.delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` for async code."""
        await self.adrive(self.core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) of these runs, in every thread
        (a SCAN: for operators); values no other checkpoint references go too."""
        self.drive(self.core.delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` for async code."""
        await self.adrive(self.core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every record of a thread that verifies (checkpoints, writes, values,
        ledger entries), re-sealed under the target's identity; damaged ones are left
        out and logged."""
        self.drive(self.core.copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` for async code."""
        await self.adrive(self.core.copy_thread(source_thread_id, target_thread_id))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """Keep the ``keep_last`` newest checkpoints of each namespace of each thread
        (plus the newest that verifies completely and the ancestors their DeltaChannels
        are rebuilt from); ``keep_last=0`` deletes the threads.

        Args:
            thread_ids: the threads.
            strategy: without ``keep_last``: ``"keep_latest"`` keeps 1, ``"delete"``
                (or ``"delete_all"``, as LangGraph Server's thread TTL says it) deletes
                the threads (as langgraph-checkpoint-redis).
            keep_last: wins over ``strategy`` when given.

        Raises:
            ConfigurationError: an unknown ``strategy``, or ``keep_last`` not an int >= 0.
        """
        self.drive(self.core.prune(thread_ids, strategy=strategy, keep_last=keep_last))

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """``prune`` for async code."""
        await self.adrive(self.core.prune(thread_ids, strategy=strategy, keep_last=keep_last))

    # -- operations beyond LangGraph's contract -------------------------------------------
    def verify(self, thread_id: str) -> VerifyReport:
        """Check every record of a thread in one round trip; changes nothing.

        Returns:
            A ``VerifyReport``: one ``Finding`` per damaged record, index member without
            its record, record outside its index, or key of the wrong type.
        """
        return self.drive(self.core.verify(thread_id))

    async def averify(self, thread_id: str) -> VerifyReport:
        """``verify`` for async code."""
        return await self.adrive(self.core.verify(thread_id))

    def acknowledge_quarantine(
        self, thread_id: str, *, reason: str, by: str | None = None
    ) -> Acknowledgement:
        """Close an incident: acknowledge every record the thread's quarantine holds now.

        The decision (``reason``, ``by``, the time, and each record's kind, field and
        why it was damaged) is recorded in the thread's ledger, where ``ledger`` and
        ``timeline`` show it; the records leave the quarantine, so ``verify`` reports
        the thread OK again until the next damage (``core/incidents.py``).

        Raises:
            InvalidConfigError: ``reason`` is empty, or nothing is quarantined.
        """
        return self.drive(self.core.acknowledge_quarantine(thread_id, reason, by))

    async def aacknowledge_quarantine(
        self, thread_id: str, *, reason: str, by: str | None = None
    ) -> Acknowledgement:
        """``acknowledge_quarantine`` for async code."""
        return await self.adrive(self.core.acknowledge_quarantine(thread_id, reason, by))

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
        return self.drive(resign_threads(self.core, thread_id, from_unsigned=from_unsigned))

    async def aresign(
        self, thread_id: str | None = None, *, from_unsigned: bool = False
    ) -> list[ResignReport]:
        """``resign`` for async code."""
        return await self.adrive(resign_threads(self.core, thread_id, from_unsigned=from_unsigned))

    def lease(
        self,
        thread: str | RunnableConfig,
        *,
        ttl: float = leases.DEFAULT_LEASE_TTL,
        wait: float = 0.0,
    ) -> AbstractContextManager[leases.Lease]:
        """Hold the thread's lease for the block: one writer per thread.

        Renewed every ``ttl / 3`` s by a background thread; the block's writes carry its
        fencing token. See ``langgraph_durable.lease``.

        Raises:
            LeaseHeldError: another worker holds it for longer than ``wait`` seconds.
            ConfigurationError: ``ttl`` or ``wait`` is not a sound number of seconds.
        """
        return leases.hold(self, thread, ttl, wait)

    def alease(
        self,
        thread: str | RunnableConfig,
        *,
        ttl: float = leases.DEFAULT_LEASE_TTL,
        wait: float = 0.0,
    ) -> AbstractAsyncContextManager[leases.Lease]:
        """``lease`` for ``async with``; renewed by an asyncio task."""
        return leases.ahold(self, thread, ttl, wait)
