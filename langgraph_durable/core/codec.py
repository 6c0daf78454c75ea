"""The record codec: how records are sealed and opened, as functions of the plan context.

Owns turning values into stored records and back: ``seal`` packs a body with msgpack and
seals it in the integrity envelope (``envelope.py``) under the record's identity (kind,
thread, field), a value compressed first where it pays (``compression.py``);
``open_record`` verifies before it unpacks; ``load_value`` decompresses and deserializes
only verified bytes, through the allowlist (``serde.py``); ``decode_entry`` turns one
entry of the read script into a ``DecodedCheckpoint`` or a ``DamagedCheckpoint``
(``records.py``). Rules:
  * Nothing stored is trusted: every record is verified, then shape-checked, before any
    of it is used; whatever fails is ``RecordDamagedError``, never a crash.
  * A record Redis would refuse as too large is refused here, typed, before it is sent.
The settings it reads (serde, envelope, compression, limits) are the context's
(``context.py``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from operator import itemgetter
from typing import Any

import msgpack
import ormsgpack

from langgraph_durable.core import blocks, elements, inputs
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import SEP, KeySchema, ThreadKeys
from langgraph_durable.core.manifests import BLOCKED_MARK, blocked_in
from langgraph_durable.core.records import (
    EMPTY,
    MALFORMED,
    MISSING_RECORD,
    NO_VALUE,
    Damage,
    DamagedCheckpoint,
    DecodedCheckpoint,
    as_text,
    check_shape,
    member_label,
)
from langgraph_durable.core.serde import accepted_types, load
from langgraph_durable.core.split_memo import SplitMemo


def seal(
    ctx: PlanContext, kind: str, thread_id: str, field_: str, body: list[Any], what: str = ""
) -> bytes:
    """The record of ``body``; with ``what`` (naming it) a record Redis would refuse
    as too large raises ValueTooLargeError instead."""
    record = ctx.envelope.seal(KeySchema.identity(kind, thread_id, field_), packed_body(body))
    if what and len(record) > ctx.max_record_bytes:  # raises: too large for Redis
        inputs.record_size(len(record), thread_id=thread_id, what=what, limit=ctx.max_record_bytes)
    return record


def packed_body(body: list[Any]) -> bytes:
    """A record's body (text, bytes, None, ints) in msgpack, as
    ``msgpack.packb(body, use_bin_type=True)`` packs it: by ormsgpack, one call that makes
    no Packer (a quarter of the time); by msgpack where ormsgpack refuses a value (a
    subclass of bytes a serializer passed through, such as numpy.bytes_)."""
    try:
        return ormsgpack.packb(body)  # type: ignore[no-any-return]
    except TypeError:
        return msgpack.packb(body, use_bin_type=True)  # type: ignore[no-any-return]


def seal_value(
    ctx: PlanContext,
    kind: str,
    thread_id: str,
    field_: str,
    head: list[Any],
    value: Any,
    what: str,
    serialized: tuple[str, bytes] | None = None,
) -> bytes:
    """The record of a value (``serialized`` already, if given); one that is too
    large on its own is refused before it is copied into a record."""
    if serialized is not None:
        type_, data = serialized
    elif value is NO_VALUE:
        type_, data = EMPTY, b""
    else:
        type_, data = ctx.serde.dumps_typed(value)
    if len(data) >= ctx.compression.min_bytes:  # a small value stays as it is, uncalled
        type_, data = ctx.compression.pack(type_, data)
    if len(data) > ctx.max_record_bytes:  # raises: too large for Redis
        inputs.record_size(len(data), thread_id=thread_id, what=what, limit=ctx.max_record_bytes)
    return seal(ctx, kind, thread_id, field_, [*head, type_, data], what)


def open_record(
    ctx: PlanContext, kind: str, thread_id: str, field_: str, record: bytes | None
) -> list[Any]:
    body = ctx.envelope.open(KeySchema.identity(kind, thread_id, field_), record)
    try:
        decoded = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:  # verified, yet not ours
        raise RecordDamagedError("undecodable body") from exc
    if not isinstance(decoded, list):
        raise RecordDamagedError("undecodable body")
    return decoded


def load_value(ctx: PlanContext, type_: Any, data: Any) -> Any:
    """A verified record's value, decompressed if it was stored compressed
    (compression.py); a type the allowlist refuses is damage (serde.py)."""
    type_, data = ctx.compression.unpack(type_, data)
    return load(ctx.serde, type_, data, accepted_types(ctx.serde))


def open_write(
    ctx: PlanContext, thread_id: str, member: str, record: bytes | None, values: Mapping[str, Any]
) -> tuple[str, Any]:
    """Open and deserialize a pending write: (channel, value), the elements its
    manifest names taken from ``values`` (a ``ValueRecords``); ``RecordDamagedError``
    (``ElementDamagedError`` for an element) if it fails."""
    channel, type_, data = open_record(ctx, "wr", thread_id, member, record)
    if type_ not in elements.MARKS:
        return channel, load_value(ctx, type_, data)
    return channel, _load_elements(ctx, elements.digests_in(type_, data), values)


def open_blob(ctx: PlanContext, thread_id: str, blob_field: str, values: Mapping[str, Any]) -> Any:
    """The channel value stored under ``blob_field`` in ``values`` (a
    ``ValueRecords``, whose manifests' elements it reads), or ``NO_VALUE``;
    ``RecordDamagedError`` (``ElementDamagedError`` for an element) if it fails."""
    digests = getattr(values, "manifests", {}).get(blob_field)
    if digests is None:
        type_, data = open_record(ctx, "bl", thread_id, blob_field, values.get(blob_field))
        if type_ == EMPTY:
            return NO_VALUE
        if type_ == BLOCKED_MARK:
            digests = blocks.expand(ctx, blocked_in(data), values)
        elif type_ in elements.MARKS:
            digests = elements.digests_in(type_, data)
        else:
            return load_value(ctx, type_, data)
    return _load_elements(ctx, digests, values)


def _load_elements(ctx: PlanContext, digests: tuple[bytes, ...], values: Mapping[str, Any]) -> Any:
    """The list (or dict: ``elements.MapDigests``) a manifest names: each element from the cache (where ``values``
    trusts it), else verified from ``values.elements`` (then cached), deserialized
    through the allowlist. A list of more than ``max_record_bytes`` serialized (what
    one record may hold: a forged manifest naming one element many times) is damage,
    not a reader out of memory."""
    found = getattr(values, "elements", {})
    cache = ctx.element_cache
    trusted = getattr(values, "trust_cache", True)
    accepted = accepted_types(ctx.serde)
    if trusted:  # the usual read of a thread this process knows: every one cached
        cached = cache.get_all(digests)
        if cached is not None:
            if sum(map(len, map(itemgetter(1), cached))) > ctx.max_record_bytes:
                raise _list_too_long(ctx)
            return _loaded(ctx, cached, digests, accepted)
    serialized = []
    total = 0
    held = values.cached if isinstance(values, elements.ValueRecords) else elements.ElementCache.get
    for digest in digests:
        known = held(cache, digest)
        if known is None:
            stored = found.get(digest)
            opened = elements.unpack(digest, stored, ctx.element_keys)
            cache.note_stored(digest, stored)  # verified: a put may check against it
            type_, data = ctx.compression.unpack(*opened)
            plain = elements.decrypted(ctx.serde, type_, data)
            if plain is None:
                cache.add(digest, type_, data, None, None)
            else:  # known by its plaintext from now on, as by its writer (elements.py),
                type_, data = plain  # if its digest is taken as a put would take it
                newest = ctx.element_keys[0] if ctx.element_keys else b""
                current = elements.key_of(digest, stored, ctx.element_keys) == newest
                content = b"%s\x00%s" % (type_.encode(), data) if current else None
                cache.add(digest, type_, data, content, stored if current else None)
            known = type_, data
        total += len(known[1])
        if total > ctx.max_record_bytes:
            raise _list_too_long(ctx)
        serialized.append(known)
    return _loaded(ctx, serialized, digests, accepted)


def _loaded(
    ctx: PlanContext,
    serialized: list[tuple[str, bytes]],
    digests: tuple[bytes, ...],
    accepted: Container[str] | None,
) -> Any:
    """The list, or the dict (``MapDigests``), that ``serialized`` elements make."""
    if not isinstance(digests, elements.MapDigests):
        return _loaded_list(ctx, serialized, len(digests), accepted)
    if sum(map(len, digests.keys)) + sum(len(d) for _, d in serialized) > ctx.max_record_bytes:
        raise _list_too_long(ctx)
    types, parts = zip(*serialized)
    value = load(ctx.serde, *elements.joined_map(digests.keys, types, parts), accepted)
    if not isinstance(value, dict) or len(value) != len(digests):
        raise RecordDamagedError("undecodable body (a dict manifest)")
    return value


def _list_too_long(ctx: PlanContext) -> RecordDamagedError:
    return RecordDamagedError(f"undecompressable: a list of more than {ctx.max_record_bytes} bytes")


def _loaded_list(
    ctx: PlanContext,
    serialized: list[tuple[str, bytes]],
    count: int,
    accepted: Container[str] | None,
) -> list[Any]:
    """The list of ``serialized`` elements (their size already checked), deserialized
    in one call where they are all msgpack."""
    types, parts = zip(*serialized) if serialized else ((), ())
    array = elements.joined(types, parts)  # one deserialization for the whole list
    if array is not None:
        value = load(ctx.serde, *array, accepted)
        if isinstance(value, list) and len(value) == count:
            return value
    return [load(ctx.serde, *known, accepted) for known in serialized]


def manifest_of(ctx: PlanContext, thread_id: str, blob_field: str, record: bytes | None) -> Any:
    """The digests a channel value record names if it is a manifest that verifies (a
    ``manifests.Blocked`` for a blocked one, to expand: ``blocks.py``), () for a value
    stored whole, None for damage (``open_blob`` will report it)."""
    if not elements.may_be_manifest(record):
        return () if record is not None else None
    try:
        type_, data = open_record(ctx, "bl", thread_id, blob_field, record)
        if type_ == BLOCKED_MARK:
            return blocked_in(data)
        return elements.digests_in(type_, data) if type_ in elements.MARKS else ()
    except (RecordDamagedError, ValueError, TypeError):
        return None


def write_manifest_of(ctx: PlanContext, thread_id: str, member: str, record: bytes | None) -> Any:
    """The digests a pending write's record names if it is a manifest that verifies,
    () for a write stored whole, None for damage."""
    if not elements.may_be_manifest(record, window=-1):
        return () if record is not None else None
    try:
        _, type_, data = open_record(ctx, "wr", thread_id, member, record)
        return elements.digests_in(type_, data) if type_ in elements.MARKS else ()
    except (RecordDamagedError, ValueError, TypeError):
        return None


def write_record(
    ctx: PlanContext,
    thread_id: str,
    member: str,
    channel: str,
    value: Any,
    what: str,
    splittable: bool,
) -> tuple[bytes, elements.Split | None]:
    """The record of a pending write, and its elements when it is stored as a
    manifest (a list of messages: elements.py; from one element on, so the message
    a task appends is stored once for its write and the checkpoints after)."""
    split, whole = _split(ctx, thread_id, value, what, 1, None) if splittable else (None, None)
    if split is None:
        record = seal_value(ctx, "wr", thread_id, member, [channel], value, what, whole)
        return record, None
    record = seal(ctx, "wr", thread_id, member, [channel, split.mark, split.manifest], what)
    return record, split


def blob_records(
    ctx: PlanContext, thread_id: str, blob_field: str, channel: str, value: Any
) -> tuple[bytes, elements.Split | None]:
    """The record of a channel value, and its elements when it is stored as a
    manifest (elements.py)."""
    what = f"the value of channel {channel!r}"
    # remembered by namespace and channel: the field without its version
    memo = (ctx.split_memo, blob_field.rsplit(SEP, 1)[0])
    split, whole = _split(ctx, thread_id, value, what, elements.MIN_ELEMENTS, memo)
    if split is None:
        return seal_value(ctx, "bl", thread_id, blob_field, [], value, what, whole), None
    key = ctx.element_keys[0] if ctx.element_keys else b""
    split = blocks.with_blocks(split, ctx.element_cache, key)
    record = seal(ctx, "bl", thread_id, blob_field, [split.mark, split.manifest], what)
    return record, split


def _split(
    ctx: PlanContext,
    thread_id: str,
    value: Any,
    what: str,
    min_elements: int,
    memo: tuple[SplitMemo, str] | None,
) -> tuple[elements.Split | None, tuple[str, bytes] | None]:
    """``elements.split`` with this context's settings; ``memo`` (the memo, and what the
    value is remembered as) for a channel value (a pending write's value is split once:
    nothing to remember)."""
    if not ctx.list_elements:
        return None, None
    kind = type(value)
    if not ((kind is list and len(value) >= min_elements) or (kind is dict and value)):
        return None, None  # what elements.split refuses at once, without its arguments
    return elements.split(
        ctx.serde,
        ctx.compression,
        value,
        ctx.element_cache,
        thread_id=thread_id,
        what=what,
        limit=ctx.max_record_bytes,
        min_elements=min_elements,
        keys=ctx.element_keys,
        memo=memo[0] if memo else None,
        memo_key=memo[1] if memo else "",
    )


def decode_entry(
    ctx: PlanContext, tk: ThreadKeys, entry: list[Any]
) -> DecodedCheckpoint | DamagedCheckpoint:
    """One entry of ``read_checkpoints.lua`` (member, record, flat writes, indexed?)."""
    try:
        member = as_text(entry[0])
        ns, checkpoint_id = ctx.keys.parse_checkpoint_member(member)
    except ValueError:  # not a member this saver wrote: drop it from the index
        label = member_label(entry[0])
        return DamagedCheckpoint(
            label,
            label.split(SEP, 1)[-1],  # its place in the index, as the next cursor
            tk.cps,
            MALFORMED,
            [("cp", entry[0], MALFORMED)],
        )
    flat = entry[2] or []
    writes = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    try:
        parent_id, ckpt_t, ckpt_b, meta_t, meta_b = open_record(
            ctx, "cp", tk.thread_id, member, entry[1]
        )
        checkpoint = load_value(ctx, ckpt_t, ckpt_b)
        metadata = load_value(ctx, meta_t, meta_b)
        check_shape(checkpoint, metadata, checkpoint_id, parent_id)
    except (RecordDamagedError, ValueError) as exc:
        reason = getattr(exc, "reason", "undecodable body")
        why = reason
        if Damage.of(reason) is Damage.MISSING:
            # Indexed without a record (evicted, a bad restore): the member leaves the
            # index, so no later read walks it again. Not indexed: never stored,
            # deleted, or quarantined before (its entry says why).
            why = MISSING_RECORD if len(entry) > 3 and entry[3] else reason
        return DamagedCheckpoint(member, checkpoint_id, tk.cp, reason, [("cp", member, why)])
    return DecodedCheckpoint(
        member=member,
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        checkpoint=checkpoint,
        metadata=metadata,  # type: ignore[arg-type]
        writes=writes,
    )


def fields_of(ctx: PlanContext, checkpoint_ns: str, versions: Mapping[str, Any]) -> list[str]:
    """The blob fields of the channel values of a checkpoint with these versions."""
    return [
        ctx.keys.blob_field(checkpoint_ns, channel, version)
        for channel, version in versions.items()
    ]


def blob_fields(ctx: PlanContext, decoded: DecodedCheckpoint) -> list[str]:
    """The blob fields of ``decoded``'s channel values, in ``channel_versions`` order
    (worked out once per decoded record: a read asks several times)."""
    if decoded.fields is None:
        decoded.fields = fields_of(
            ctx, decoded.checkpoint_ns, decoded.checkpoint.get("channel_versions", {})
        )
    return decoded.fields


def values_verify(
    ctx: PlanContext, tk: ThreadKeys, d: DecodedCheckpoint, values: Mapping[str, Any]
) -> bool:
    """Whether every channel value of ``d`` in ``values`` verifies and deserializes."""
    try:
        for blob_field in blob_fields(ctx, d):
            open_blob(ctx, tk.thread_id, blob_field, values)
    except RecordDamagedError:
        return False
    return True
