"""DeltaChannel history: what LangGraph's ``DeltaChannel`` is rebuilt from.

Owns ``get_delta_channel_history``: walk the parent chain once for all asked channels,
a page of ancestors per round trip, stopping each channel at its seed (the nearest
ancestor that stores a value for it) and collecting the writes on the way. Damage on
the path raises ``CheckpointCorruptedError``: a history with a hole would rebuild a
wrong value. Built on the reads (``reads.py``, ``values.py``) and the record codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite

from langgraph_durable.core import codec, reads, values
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ElementDamagedError
from langgraph_durable.core.errors import CheckpointCorruptedError, RecordDamagedError
from langgraph_durable.core.inputs import configurable
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.records import (
    LIST_PAGE,
    NO_VALUE,
    Damage,
    DamagedCheckpoint,
    DecodedCheckpoint,
    member_label,
    task_of,
    thread_id_of,
)


def get_delta_channel_history(
    ctx: PlanContext, config: RunnableConfig, channels: Sequence[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    """Walk the parent chain once for all channels, a page of ancestors per round trip.

    A channel stops at the nearest ancestor that stores a value for it (its seed);
    the writes of every ancestor on the path, seed included, are collected oldest first.
    """
    if not channels:
        return {}
    conf = configurable(config)
    thread_id = thread_id_of(conf)
    ns = conf.get("checkpoint_ns", "")
    tk = ctx.keys.thread(thread_id)
    # Only the target's record is needed (its parent); its values were just loaded by
    # the caller's get_tuple, so they are not read or deserialized a second time here.
    target_id = conf.get("checkpoint_id")
    upper, lower = ctx.keys.namespace_range(ns)
    entries, _ = yield from reads.read_entries(
        ctx,
        tk,
        ["members", ctx.keys.checkpoint_member(ns, target_id)]
        if target_id
        else ["range", upper, lower, 1],
    )
    target = codec.decode_entry(ctx, tk, entries[0]) if entries else None
    if isinstance(target, DamagedCheckpoint):
        if Damage.of(target.reason) is not Damage.MISSING:
            raise CheckpointCorruptedError(
                thread_id=thread_id,
                checkpoint_ns=ns,
                checkpoint_id=target.checkpoint_id,
                key=target.key,
                reason=target.reason,
            )
        target = None
    collected: dict[str, list[PendingWrite]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    wanted_id = target.parent_id if target else None
    cursor = target.checkpoint_id if target else None
    while wanted_id and remaining:
        upper, lower = ctx.keys.namespace_range(ns, cursor)
        entries, _ = yield from reads.read_entries(ctx, tk, ["range", upper, lower, LIST_PAGE])
        if not entries:
            break
        page = [codec.decode_entry(ctx, tk, entry) for entry in entries]
        on_path: list[DecodedCheckpoint] = []
        for d in page:  # newest first: follow parent pointers through the page
            if d.checkpoint_id != wanted_id:
                continue
            if isinstance(d, DamagedCheckpoint):
                raise CheckpointCorruptedError(
                    thread_id=thread_id,
                    checkpoint_ns=ns,
                    checkpoint_id=d.checkpoint_id,
                    key=d.key,
                    reason=f"{d.reason} (an ancestor DeltaChannel history needs)",
                )
            on_path.append(d)
            wanted_id = d.parent_id
        fields = sorted(
            {
                ctx.keys.blob_field(ns, ch, d.checkpoint["channel_versions"][ch])
                for d in on_path
                for ch in remaining
                if ch in d.checkpoint.get("channel_versions", {})
            }
        )
        blobs = yield from values.read_values(ctx, tk, fields, on_path)
        for d in on_path:
            if not remaining:
                break
            for raw_member, record in reversed(d.writes):
                write_member = member_label(raw_member)
                if task_of(ctx.keys, write_member) is None:
                    continue  # a malformed index member is no write at all
                try:
                    channel, value = codec.open_write(ctx, thread_id, write_member, record, blobs)
                except RecordDamagedError as exc:
                    raise CheckpointCorruptedError(
                        thread_id=thread_id,
                        checkpoint_ns=ns,
                        checkpoint_id=d.checkpoint_id,
                        key=tk.wr,
                        reason=f"{exc.reason} write {write_member!r}",
                    ) from exc
                if channel in remaining:
                    task_id = ctx.keys.parse_write_member(write_member).task_id
                    collected[channel].append((task_id, channel, value))
            for ch in list(remaining):
                version = d.checkpoint.get("channel_versions", {}).get(ch)
                if version is None:
                    continue
                blob_field = ctx.keys.blob_field(ns, ch, version)
                try:
                    value = codec.open_blob(ctx, thread_id, blob_field, blobs)
                except RecordDamagedError as exc:
                    # A value never stored is no seed here; a seed whose element is
                    # gone is damage: skipping it would rebuild a wrong value.
                    missing = Damage.of(exc.reason) is Damage.MISSING
                    if missing and not isinstance(exc, ElementDamagedError):
                        continue
                    raise CheckpointCorruptedError(
                        thread_id=thread_id,
                        checkpoint_ns=ns,
                        checkpoint_id=d.checkpoint_id,
                        key=tk.el if isinstance(exc, ElementDamagedError) else tk.bl,
                        reason=f"{exc.reason} channel value {ch!r}",
                    ) from exc
                if value is not NO_VALUE:
                    seeds[ch] = value
                    remaining.discard(ch)
        cursor = page[-1].checkpoint_id
    result: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
        if ch in seeds:
            entry["seed"] = seeds[ch]
        result[ch] = entry
    return result
