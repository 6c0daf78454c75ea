"""The saver core: every checkpointer operation as a pure plan, one concern per module.

Nothing here does I/O. Every operation is a generator (a *plan*, ``ops.py``) that yields
what it needs done and is sent the reply; the sync and async savers only drive plans
(``BaseRedisSaver.drive`` / ``adrive``), so each operation, its round trips and its
fallback logic exist exactly once. Every plan is a function of the plan context
(``context.py``: the settings and caches plans share). ``SaverCore`` is that context
plus the contract, written once: one method per operation, each handing itself to the
module that owns it.

Where each concern lives:
  ``context.py``      the settings and caches every plan reads (``PlanContext``)
  ``ops.py``          what a plan may yield
  ``reply_codes.py``  error replies and Lua codes -> typed errors (the one table)
  ``codec.py``        the record codec: seal, verify, decode
  ``records.py``      decoded records and damage reasons
  ``values.py``       the channel values and elements a read needs
  ``reads.py``        the read steps every reading plan shares, quarantine, reindex
  ``fallback.py``     ``get_tuple``: the newest checkpoint that verifies, reported
  ``listing.py``      ``list``
  ``writes.py``       ``put``, ``put_writes``
  ``round_trips.py``  a write's round trip: replicas' acknowledgements, repair, errors
  ``retention.py``    ``keep_last``, guarded deletions
  ``threads.py``      ``delete_thread``, ``copy_thread``, ``prune``, ``delete_for_runs``
  ``verify.py``       ``verify``
  ``incidents.py``    ``acknowledge_quarantine``: an operator closes an incident
  ``delta.py``        ``get_delta_channel_history``
  ``fencing.py``      lease plans and the fencing token a write carries
  ``runs.py``         the run index ``delete_for_runs`` searches
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_durable.core import (
    delta,
    fallback,
    fencing,
    incidents,
    listing,
    reads,
    round_trips,
    threads,
    verify,
    writes,
)
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.fencing import Lease
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Plan, traced, traced_at, where
from langgraph_durable.core.reports import VerifyReport

_put_writes = writes.put_writes  # in ``SaverCore.put_writes`` its parameter hides ``writes``


class SaverCore(PlanContext):
    """Plans for every checkpointer operation, shared by ``RedisSaver`` and ``AsyncRedisSaver``."""

    def get_tuple(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        return traced_at("get_tuple", fallback.get_tuple(self, config), config)

    def get_delta_channel_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Plan[dict[str, DeltaChannelHistory]]:
        plan = delta.get_delta_channel_history(self, config, channels)
        return traced("get_delta_channel_history", plan, *where(config))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        plan = writes.put(self, config, checkpoint, metadata, new_versions)
        return traced_at("put", plan, config, checkpoint)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Plan[None]:
        return traced_at(
            "put_writes", _put_writes(self, config, writes, task_id, task_path), config
        )

    def write_round_trip(
        self, commands: list[Any], raising: bool = False, **batch: Any
    ) -> Plan[tuple[list[Any], Any]]:
        return round_trips.write_round_trip(self, commands, raising, **batch)

    def replicated(self, tk: ThreadKeys, acked: Any) -> None:
        round_trips.replicated(self, tk, acked)

    def all_thread_ids(self) -> Plan[list[str]]:
        return reads.all_thread_ids(self)

    def delete_thread(self, thread_id: str) -> Plan[None]:
        return traced("delete_thread", threads.delete_thread(self, thread_id), str(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Plan[None]:
        plan = threads.copy_thread(self, source_thread_id, target_thread_id)
        return traced("copy_thread", plan, str(source_thread_id))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> Plan[None]:
        return traced(
            "prune", threads.prune(self, thread_ids, strategy=strategy, keep_last=keep_last)
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> Plan[None]:
        return traced("delete_for_runs", threads.delete_for_runs(self, run_ids))

    def index_runs(self) -> Plan[int]:
        return threads.index_runs(self)

    def verify(self, thread_id: str) -> Plan[VerifyReport]:
        return traced("verify", verify.verify(self, thread_id), str(thread_id))

    def acknowledge_quarantine(
        self, thread_id: str, reason: str, by: str | None
    ) -> Plan[incidents.Acknowledgement]:
        plan = incidents.acknowledge(self, thread_id, reason=reason, by=by)
        return traced("acknowledge_quarantine", plan, str(thread_id))

    def acquire_lease(self, lease: Lease) -> Plan[str]:
        return traced("acquire_lease", fencing.acquire_lease(self, lease), lease.thread_id)

    def renew_lease(self, lease: Lease) -> Plan[bool]:
        return traced("renew_lease", fencing.renew_lease(self, lease), lease.thread_id)

    def release_lease(self, lease: Lease) -> Plan[bool]:
        return traced("release_lease", fencing.release_lease(self, lease), lease.thread_id)

    # Last: a method named ``list`` would hide the builtin from the annotations after it.
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Plan[None]:
        plan = listing.list_checkpoints(self, config, filter=filter, before=before, limit=limit)
        return traced("list", plan, *where(config))
