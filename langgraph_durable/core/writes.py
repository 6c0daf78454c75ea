"""Writes: ``put`` and ``put_writes``, each one round trip, whole or not at all.

Owns the write conversation. Rules it keeps:
  * One round trip per write: the changed channel values by plain HSETNX and the
    write script in one pipeline (MULTI with a ttl, so a value hash never lacks its
    expiry); the script indexes the checkpoint only once every value it names is stored.
  * A value never changes under its version, so HSETNX is idempotent and a resend after
    a dropped connection stores the same bytes again.
  * Every write carries this context's fencing token (``fencing.py``); the script
    refuses it when another worker holds the thread or took it over.
  * Never written is not lost: a version a checkpoint keeps that no write stored (a
    hand-built first checkpoint, a channel renamed on load) gets an "empty" record at
    write time, read as no value (``kept_values.py``); any other kept version must be
    there.
  * A parent that is gone (retention, a restore) is refused (``CheckpointLostError``),
    never built on; a key of the wrong type is moved to its damaged twin and the write
    sent again (``LGD_REPAIR``).
  * With ``wait_for_replicas``, the write is acknowledged by that many replicas or
    ``NotReplicatedError`` says it was not (``round_trips.py``: WAIT goes in the
    write's own round trip, on the connection that wrote).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    INTERRUPT,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)

from langgraph_durable.core import (
    codec,
    inputs,
    kept_values,
    reply_codes,
    retention,
    round_trips,
)
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.element_window import unsent_window
from langgraph_durable.core.errors import InvalidConfigError
from langgraph_durable.core.fencing import held_token
from langgraph_durable.core.heads import sealed_head
from langgraph_durable.core.inputs import configurable
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.layouts import COMPACT, compact_keys
from langgraph_durable.core.ops import Batch, Plan, Script
from langgraph_durable.core.records import (
    NO_VALUE,
    checkpoint_config,
    thread_id_of,
)

# Values up to this size go inside the put's script call, bigger ones ahead of it.
INLINE_VALUE_MAX = 2048

logger = logging.getLogger("langgraph_durable")


def put(
    ctx: PlanContext,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Plan[RunnableConfig]:
    conf = configurable(config)
    thread_id = thread_id_of(conf)
    ns = conf.get("checkpoint_ns", "")
    parent_id = conf.get("checkpoint_id")
    inputs.text(checkpoint["id"], "checkpoint['id']")
    if not inputs.all_ascii_text(new_versions):  # else one by one, to say which is not
        for channel in new_versions:
            inputs.text(channel, "a channel name in new_versions")
    tk = ctx.keys.thread(thread_id)
    stored = dict(checkpoint)
    values: dict[str, Any] = stored.pop("channel_values", {})
    meta = get_serializable_checkpoint_metadata(config, metadata)
    member = ctx.keys.checkpoint_member(ns, checkpoint["id"])
    record = codec.seal(
        ctx,
        "cp",
        thread_id,
        member,
        [parent_id, *ctx.serde.dumps_typed(stored), *ctx.serde.dumps_typed(meta)],
        f"checkpoint {checkpoint['id']!r} (with its metadata)",
    )
    # The namespace's bounds, for the script to count its checkpoints: for keep_last,
    # and for a put without a parent (never written only into an empty namespace).
    # Not otherwise: a ZLEXCOUNT per put on the hot path for nothing.
    upper, lower = ctx.keys.namespace_range(ns) if ctx.keep_last or not parent_id else ("", "")
    kept_versions = {
        c: v for c, v in checkpoint["channel_versions"].items() if c not in new_versions
    }
    run_id = str(meta.get("run_id") or "")
    blobs: list[tuple[str, bytes]] = []  # only changed channels are written
    manifests: dict[str, tuple[bytes, ...]] = {}
    new_elements: dict[bytes, bytes] = {}
    for channel, version in new_versions.items():
        blob_field = ctx.keys.blob_field(ns, channel, version)
        value = values.get(channel, NO_VALUE)
        value_record, split = codec.blob_records(ctx, thread_id, blob_field, channel, value)
        blobs.append((blob_field, value_record))
        if split is not None:
            manifests[channel] = split.named
            new_elements.update(split.stored)
    # The parent as this saver last wrote or read it (None: another one, or none).
    parent = ctx.newest_versions.entry((thread_id, ns)) if parent_id else None
    if parent is not None and parent.checkpoint_id != parent_id:
        parent = None
    # Elements the parent's manifests name are there while the parent is (retention
    # keeps them): not sent again, but the script checks each is there (a field
    # deleted, a damaged one a reader quarantined): else they are sent (below).
    known: frozenset[bytes] = frozenset()
    written: frozenset[bytes] = frozenset()  # stored by the parent's pending writes
    if parent is not None and parent.manifests:
        for channel, digests in parent.manifests.items():
            if channel not in new_versions and parent.versions.get(channel) == checkpoint[
                "channel_versions"
            ].get(channel):  # kept unchanged
                manifests[channel] = digests
    if parent_id and new_elements:
        # The new messages came from the parent's tasks, whose writes this saver stored
        # with their elements: named, not sent again, and checked first (below).
        written = ctx.newest_versions.written((thread_id, ns), parent_id)
        known = written if parent is None else parent.digests | written
    # new_elements holds every element of each changed list: the difference in C
    elements = sorted((d, new_elements[d]) for d in new_elements.keys() - known)
    checked_from = parent.checked_from if parent is not None else 0
    check_all = parent.check_all if parent is not None else False

    def window_of(elements: list[tuple[bytes, bytes]], first: frozenset[bytes]) -> Any:
        return unsent_window(
            manifests,
            elements,
            ctx.element_cache,
            ctx.verify_elements_on_write,
            checked_from,
            first,
            check_all,
        )

    unsent, window, checked_next = window_of(elements, written)
    remade: list[tuple[str, bytes]] = []  # kept values' manifests made again (below)
    parent_versions = parent.versions if parent is not None else None
    head = sealed_head(ctx.envelope, thread_id, ns, checkpoint["id"])  # heads.py
    resent = reread = False  # each retry below at most once
    while True:
        named, unwritten, when = kept_values.kept_fields(
            ctx, ns, kept_versions, parent_id, parent_versions, checkpoint["channel_versions"]
        )
        args: list[Any] = [
            ctx.ttl_arg,
            held_token(ctx.keys.prefix, thread_id),
            member,
            record,
            run_id,
            lower,
            upper,
            ctx.keys.checkpoint_member(ns, parent_id) if parent_id else "",
            unsent,
            len(named),
            *named,
            len(unwritten),
            when,
            *(x for f in unwritten for x in (f, kept_values.never_written(ctx, thread_id, f))),
        ]
        # One round trip: the window of elements named without sending, read
        # (element_window.py); the values by plain HSETNX (a value never changes under
        # its version, and a fenced-out writer's versions have tails of their own, so it
        # can only leave orphans), the elements by HSET (bytes hashed to their digest:
        # right, and written over a damaged copy),
        # then the script, which indexes the checkpoint only once the values and the
        # elements sent are all there (one named without sending found not there intact
        # makes the put go again with every element, before it returns: below).
        # With a ttl, MULTI keeps a client that dies halfway from leaving a hash
        # without an expiry.
        # A small value or element goes inside the script call: sent ahead, it would
        # cost the script a check that it is there (HEXISTS), and Redis a command of
        # its own.
        checks = window.commands(tk.el, tk.qt) if window else []
        ahead, small = _by_size(blobs)
        big, within = _by_size(elements)
        sent = [
            len(big),
            "sent",
            *[d for d, _ in big],
            len(ahead),
            *[f for f, _ in ahead],
            len(within) // 2,
            *within,
            *small,
        ]
        script = write_script(ctx, tk, "put_checkpoint", [*args, *sent, *head])
        replies, acked = yield from round_trips.write_round_trip(
            ctx,
            [
                *checks,
                *(("HSET", tk.el, d, e) for d, e in big),
                *(("HSETNX", tk.bl, f, r) for f, r in ahead),
                *(("HSET", tk.bl, f, r) for f, r in remade),
                script,
            ],
            atomic=bool(ctx.ttl),
            ahead=ctx.run_index.ahead(run_id, thread_id),
        )
        found = None  # an element named without sending that is not there intact
        if window is not None and not isinstance(replies[-1], Exception):
            found = window.finding(replies[: len(checks)])
            check_all = window.quarantined(replies[: len(checks)])
            if found == "unchecked":  # a reader quarantined something: all are checked
                others = window.of_rest(ctx.element_cache)
                found = others.finding(
                    (yield Batch(others.commands(tk.el, tk.qt), errors_as_values=True))
                )
        elif unsent and reply_codes.lost_element(replies[-1]):  # verify_elements_on_write
            found = "damaged" if "damaged" in str(replies[-1]) else "missing"
        if found and resent and window is not None:  # sent again, and still not there
            raise reply_codes.TYPED_ERRORS[reply_codes.LOST](ctx.keys, script, thread_id, "element")
        if found and not resent:
            resent = True
            logger.warning(
                "thread %r: an element checkpoint %r names is %s in Redis; the put "
                "sends its elements again",
                thread_id,
                checkpoint["id"],
                found,
            )
            # An element it names is not there: every element its values hold goes,
            # written over what is stored (elements.py), before the put returns (so
            # what it acknowledges reads back).
            remade, stored_ = kept_values.every_element(
                ctx, thread_id, ns, values, kept_versions, manifests
            )
            new_elements.update(stored_)
            elements = sorted(new_elements.items())
            unsent, window, checked_next = window_of(elements, frozenset())
            continue
        if (
            not reread
            and parent_id
            and parent_versions is None
            and reply_codes.lost_value(replies[-1])
        ):
            # A parent this saver did not write or read last: a kept value is not
            # there. Whether the parent names it is read from the parent's record;
            # if not, it was never written, and the write goes again saying so.
            reread = True
            parent_versions = yield from kept_values.stored_versions(ctx, tk, ns, parent_id)
            if parent_versions is not None:
                continue
        break
    for reply in replies[:-1]:  # a value refused (out of memory...): say why, typed
        if isinstance(reply, Exception) and not reply_codes.is_wrong_type(reply):
            raise reply
    in_namespace, acked = yield from round_trips.write_reply(ctx, tk, script, replies[-1], acked)
    if in_namespace == -1:  # a hash has the wrong type: repair, values inline
        pairs = [x for pair in (*elements, *blobs, *remade) for x in pair]
        inline = Script(
            "put_checkpoint", tk.with_twins(), [*args, len(elements), "inline", *pairs, *head]
        )
        (in_namespace,), acked = yield from round_trips.write_round_trip(
            ctx, [inline], raising=True
        )
    versions = checkpoint.get("channel_versions", {})
    ctx.newest_versions.remember(
        (thread_id, ns), versions, checkpoint["id"], manifests, checked_next, check_all
    )
    ctx.recent_fields.recall(
        thread_id, ns, checkpoint["id"], [*named, *unwritten, *[f for f, _ in blobs]]
    )
    round_trips.replicated(ctx, tk, acked)
    keep_last = ctx.keep_last
    if keep_last and in_namespace > keep_last + max(4, keep_last // 4):
        # Amortized retention: one collection per keep_last/4 puts, not one per put.
        yield from retention.collect(
            ctx,
            tk,
            lambda decoded, pinned: retention.prunable(decoded, keep_last, pinned),
            pin_valid=True,
        )
    return checkpoint_config(thread_id, ns, checkpoint["id"])


def _by_size(
    pairs: list[tuple[Any, bytes]],
) -> tuple[list[tuple[Any, bytes]], list[Any]]:
    """(the pairs whose bytes go ahead of the put's script, the others flattened for
    its call): in one pass, the order kept."""
    ahead: list[tuple[Any, bytes]] = []
    inline: list[Any] = []
    for pair in pairs:
        if len(pair[1]) > INLINE_VALUE_MAX:
            ahead.append(pair)
        else:
            inline += pair
    return ahead, inline


def write_script(ctx: PlanContext, tk: ThreadKeys, name: str, args: list[Any]) -> Script:
    """A call of write script ``name``: without a ttl, with the keys of its compact layout
    (``layouts.py``: fewer keys, less work for Redis at every call)."""
    if ctx.ttl_arg:
        return Script(name, tk.for_writes(), args)
    return Script(name, compact_keys(tk, name), args, COMPACT)


def put_writes(
    ctx: PlanContext,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Plan[None]:
    conf = configurable(config)
    thread_id = thread_id_of(conf)
    ns = conf.get("checkpoint_ns", "")
    checkpoint_id = conf.get("checkpoint_id")
    if not checkpoint_id:
        raise InvalidConfigError("put_writes needs config['configurable']['checkpoint_id']")
    inputs.text(task_id, "task_id")
    inputs.text(task_path, "task_path")
    tk = ctx.keys.thread(thread_id)
    # A thread waiting on an interrupt() keeps its keys until answered, whatever the
    # ttl (a human may take their time); its next checkpoint write sets the ttl again.
    waits = ctx.ttl_arg and any(channel == INTERRUPT for channel, _ in writes)
    triples: list[Any] = []
    new_elements: dict[bytes, bytes] = {}
    for idx, (channel, value) in enumerate(writes):
        if type(channel) is not str or not channel.isascii():  # else inputs.text passes it
            inputs.text(channel, f"the channel of pending write {idx} of task {task_id!r}")
        special = channel in WRITES_IDX_MAP
        member = ctx.keys.write_member(
            ns, checkpoint_id, task_path, task_id, WRITES_IDX_MAP[channel] if special else idx
        )
        what = f"the pending write to channel {channel!r} of task {task_id!r}"
        # A special channel's write is overwritten, not appended to: kept whole.
        record, split = codec.write_record(
            ctx, thread_id, member, channel, value, what, splittable=not special
        )
        if split is not None:
            new_elements.update(split.stored)
        triples += [member, record, "1" if special else "0"]
    newest = ctx.newest_versions.entry((thread_id, ns))
    if newest is not None and new_elements:
        # LangGraph may store a task's writes after its checkpoint's child, whose put
        # sent the same new messages: they are stored, not sent again.
        stored_ = newest.digests
        new_elements = {d: e for d, e in new_elements.items() if d not in stored_}
    if triples:
        elements = [x for pair in sorted(new_elements.items()) for x in pair]
        args = [
            "persist" if waits else ctx.ttl_arg,
            held_token(ctx.keys.prefix, thread_id),
            len(new_elements),
            *elements,
            *triples,
        ]
        script = write_script(ctx, tk, "put_writes", args)
        (reply,), acked = yield from round_trips.write_round_trip(ctx, [script])
        _, acked = yield from round_trips.write_reply(ctx, tk, script, reply, acked)
        round_trips.replicated(ctx, tk, acked)
        if new_elements:  # the next put names them without sending them again
            ctx.newest_versions.wrote((thread_id, ns), checkpoint_id, new_elements)
