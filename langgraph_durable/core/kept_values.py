"""What a checkpoint keeps from its parent: the blob fields of the values it passes on
(named, or never written), and for a put sent again with every element, the kept values
made again. Part of ``writes.put``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_durable.core import codec, reads
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.manifests import every_digest
from langgraph_durable.core.ops import Plan
from langgraph_durable.core.records import NO_VALUE, DecodedCheckpoint


def every_element(
    ctx: PlanContext,
    thread_id: str,
    ns: str,
    values: Mapping[str, Any],
    kept_versions: Mapping[str, Any],
    manifests: dict[str, tuple[bytes, ...]],
) -> tuple[list[tuple[str, bytes]], dict[bytes, bytes]]:
    """For a put sent again with every element its values hold: the kept values' records
    made again where their manifests changed (an EncryptedSerializer's fresh ciphertext,
    a newer signing key split a list to other digests: the same list, named by elements
    that are there; ``manifests`` updated), and the elements of the kept values."""
    remade: list[tuple[str, bytes]] = []
    stored: dict[bytes, bytes] = {}
    for channel in [c for c in manifests if c in kept_versions and c in values]:
        field_ = ctx.keys.blob_field(ns, channel, kept_versions[channel])
        record, split = codec.blob_records(ctx, thread_id, field_, channel, values[channel])
        if split is None:
            continue
        stored.update(split.stored)
        if every_digest(split.named) != every_digest(manifests[channel]):
            remade.append((field_, record))
            manifests[channel] = split.named
    return remade, stored


def kept_fields(
    ctx: PlanContext,
    ns: str,
    kept: Mapping[str, Any],
    parent_id: str | None,
    parent_versions: Mapping[str, Any] | None,
    versions: Mapping[str, Any],
) -> tuple[list[str], list[str], str]:
    """The blob fields of the versions a checkpoint keeps (names without writing),
    split by what the saver recorded when they were written: (*named*, *unwritten*,
    when the unwritten are).

    * *named*: a write stored the value (or its "never written" record): the parent
      names the same version, or the channel at another version (``update_state``'s
      copy of a checkpoint keeps what that checkpoint wrote). Missing, the script
      refuses the write (``CheckpointLostError``): a value lost.
    * *unwritten*, ``"renamed"``: a version the parent names under a channel this
      checkpoint no longer has, kept under a new name: LangGraph renamed the channel
      when it migrated an older checkpoint on load, and never stored its value under
      the new name.
    * *unwritten*, ``"first"``: no parent (a hand-built checkpoint, as
      langgraph-checkpoint-redis's README puts): never written while the namespace
      holds no checkpoint; once it holds one, the script treats them as named.

    The script stores an "empty" record under each unwritten version that is missing,
    which reads as no value, as InMemorySaver reads a version it never stored; a value
    stored under one stays. With a parent whose versions are unknown here
    (``parent_versions`` None), every kept version counts as named; a refusal then
    reads the parent (``put``)."""
    if not parent_id:
        return [], codec.fields_of(ctx, ns, kept), "first"
    if parent_versions is None or parent_versions.keys() <= versions.keys():
        # the parent's versions unknown, or none of its channels gone: none renamed
        return codec.fields_of(ctx, ns, kept), [], "renamed"
    gone = {v for c, v in parent_versions.items() if c not in versions}  # renamed from
    renamed = {c: v for c, v in kept.items() if parent_versions.get(c) != v and v in gone}
    named = {c: v for c, v in kept.items() if c not in renamed}
    return codec.fields_of(ctx, ns, named), codec.fields_of(ctx, ns, renamed), "renamed"


def never_written(ctx: PlanContext, thread_id: str, blob_field: str) -> bytes:
    """The record of a version no write stored: the "empty" value record."""
    return codec.seal_value(ctx, "bl", thread_id, blob_field, [], NO_VALUE, "")


def stored_versions(
    ctx: PlanContext, tk: ThreadKeys, ns: str, checkpoint_id: str
) -> Plan[dict[str, Any] | None]:
    """The channel versions the stored record of a checkpoint names; None when it is
    gone or does not verify."""
    member = ctx.keys.checkpoint_member(ns, checkpoint_id)
    entries, _ = yield from reads.read_entries(ctx, tk, ["members", member])
    decoded = codec.decode_entry(ctx, tk, entries[0]) if entries else None
    if not isinstance(decoded, DecodedCheckpoint):
        return None
    return dict(decoded.checkpoint.get("channel_versions") or {})
