"""Reading channel values and the elements their manifests name, in as few round trips
as the guesses allow.

Owns the value half of every read: the plain HMGETs of values and elements (never a
script: a large value returned through Lua costs Redis about as much again as the read
itself, ~270 µs per 150 KB), the guess of the elements a thread's values name (those
this saver remembers, ``newest.py``, less those it holds, ``elements.ElementCache``),
and opening each manifest once. A hash of the wrong type (damage) reads as empty and
is logged. Used by ``reads.py``, retention and DeltaChannel history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph_durable.core import blocks, codec, reply_codes
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ValueRecords
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.manifests import Blocked
from langgraph_durable.core.ops import Batch, Plan
from langgraph_durable.core.records import DecodedCheckpoint, member_label

logger = logging.getLogger("langgraph_durable")


def value_reads(
    tk: ThreadKeys, fields: Sequence[str], digests: Sequence[bytes]
) -> list[tuple[Any, ...]]:
    """Plain HMGETs, never a script: a large value returned through Lua costs Redis about
    as much again as the read itself (~270 µs per 150 KB)."""
    return [
        *([("HMGET", tk.bl, *fields)] if fields else []),
        *([("HMGET", tk.el, *digests)] if digests else []),
    ]


def read_values(
    ctx: PlanContext,
    tk: ThreadKeys,
    fields: list[str],
    decoded: Iterable[DecodedCheckpoint] = (),
    into: ValueRecords | None = None,
    trust_cache: bool = True,
) -> Plan[ValueRecords]:
    """The records of ``fields`` (added to ``into``) and the elements the manifests
    among them and among the pending writes of ``decoded`` name: one round trip when
    the elements remembered for the thread are all they name. Without
    ``trust_cache``, every element is read from Redis (what must be there, not what
    this process holds)."""
    values = ValueRecords(trust_cache=trust_cache) if into is None else into
    if fields:
        remembered = ctx.newest_versions.elements(tk.thread_id)
        if values.trust_cache:
            remembered = remembered.difference(ctx.element_cache.contents())
        guess = sorted(remembered)
        replies = yield Batch(value_reads(tk, fields, guess), errors_as_values=True)
        values.merge(from_replies(tk, fields, guess, replies))
    yield from _with_elements(ctx, tk, values, decoded)
    return values


def _with_elements(
    ctx: PlanContext,
    tk: ThreadKeys,
    values: ValueRecords,
    decoded: Iterable[DecodedCheckpoint] = (),
) -> Plan[None]:
    """Open the manifests among ``values`` and the pending writes of ``decoded``
    (once) and read the elements they name that were not read yet, in one round trip
    (two where a blocked manifest's blocks were not read yet: ``blocks.py``)."""
    cache = ctx.element_cache
    # Only where the cache is trusted: a read that must find every element in Redis
    # opens every manifest (and its blocks) itself.
    opened = cache.manifests if values.trust_cache else {}
    for blob_field, record in values.items():
        if blob_field not in values.manifests and blob_field not in values.unexpanded:
            key = (tk.thread_id, blob_field, record)
            if type(record) is bytes and (known := opened.get(key)) is not None:
                values.manifests[blob_field] = known
                continue
            digests = codec.manifest_of(ctx, tk.thread_id, blob_field, record)
            if isinstance(digests, Blocked):
                values.unexpanded[blob_field] = digests
            elif digests:  # () stored whole; None damage, reported when opened
                values.manifests[blob_field] = digests
                cache.remember_manifest(key, digests)
    for d in decoded:
        for raw_member, record in d.writes:
            member = member_label(raw_member)
            if member not in values.write_manifests:
                digests = codec.write_manifest_of(ctx, tk.thread_id, member, record)
                if digests:
                    values.write_manifests[member] = digests
    yield from _read_wanted(tk, values, values.wanted_elements(ctx.element_cache))
    if not values.unexpanded:
        return
    expanded = []  # then the elements the blocks name
    for blob_field, blocked in list(values.unexpanded.items()):
        try:
            values.manifests[blob_field] = blocks.expand(ctx, blocked, values)
        except RecordDamagedError:  # reported when the value is opened
            continue
        record = values.get(blob_field)
        if type(record) is bytes:
            cache.remember_manifest(
                (tk.thread_id, blob_field, record), values.manifests[blob_field]
            )
        del values.unexpanded[blob_field]
        expanded.append(values.manifests[blob_field])
    yield from _read_wanted(tk, values, values.wanted_elements(ctx.element_cache, expanded))


def _read_wanted(tk: ThreadKeys, values: ValueRecords, wanted: list[bytes]) -> Plan[None]:
    if wanted:
        replies = yield Batch(value_reads(tk, (), wanted), errors_as_values=True)
        values.merge(from_replies(tk, (), wanted, replies))


def from_replies(
    tk: ThreadKeys,
    fields: Sequence[str],
    digests: Sequence[bytes],
    replies: Sequence[list[Any] | Exception],
) -> ValueRecords:
    """The replies of ``value_reads(tk, fields, digests)``; a hash of the wrong type
    (damage) reads as empty."""
    values = ValueRecords()
    replies = list(replies)
    for key, names, out in ((tk.bl, fields, values), (tk.el, digests, values.elements)):
        if not names:
            continue
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            if not reply_codes.is_wrong_type(reply):
                raise reply
            log_wrongtype(tk, [key.encode()])
            reply = [None] * len(names)  # damage: read as missing
        out.update(zip(names, reply))
    return values


def log_wrongtype(tk: ThreadKeys, keys: list[bytes]) -> None:
    for key in keys:
        logger.error(
            "langgraph-durable: key %s of thread %r has the wrong type (damaged): read as empty",
            member_label(key),
            tk.thread_id,
        )
