"""Reading checkpoints: records, pending writes and channel values, verified, with repair.

Owns the read conversation every reading plan shares (``get_tuple``, ``list``, retention,
DeltaChannel history): ``read_checkpoints.lua`` returns records and their pending writes
in one round trip, together with a guess of the channel values and of the elements their
manifests name (``newest.py``, ``values.py``); what the guess missed is read in a
second (values) and a third (elements a process holds no copy of). Rules it keeps:
  * Every record is verified before it is used (``codec.py``); a checkpoint with any
    damaged part is a ``DamagedCheckpoint``, never a partial tuple. A task whose pending writes are
    not all intact loses all of them: it runs again as a whole.
  * Damage is moved to the thread's quarantine (``repair_on_read``), best effort: a read
    never fails because Redis refuses writes. Damage that may be this reader's
    configuration (a key it lacks, an allowlist) is never moved.
  * An index that lacks stored records (evicted, a bad restore) is rebuilt from the
    records (``reindex.lua``), so nothing silently vanishes.
  * A value or element deleted between two reads (retention racing) is told from damage
    by ``recheck_values.lua``: the checkpoint that named it is gone too.
  * ``refresh_on_read``: a read of a thread gives its keys their full ttl again, as a
    write does (``refresh_ttl``), but for keys without one (a thread waiting on an
    interrupt); the lease and the fence keep their own expiry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, PendingWrite

from langgraph_durable.core import codec, reply_codes, values
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ElementDamagedError, ValueRecords
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Batch, Note, Plan, ScanKeys, Script
from langgraph_durable.core.records import (
    MALFORMED,
    NO_VALUE,
    Damage,
    DamagedCheckpoint,
    DecodedCheckpoint,
    as_text,
    checkpoint_config,
    member_label,
    task_of,
)
from langgraph_durable.core.reports import RecoveryReport, SkippedCheckpoint

logger = logging.getLogger("langgraph_durable")


def all_thread_ids(ctx: PlanContext) -> Plan[list[str]]:
    """Every thread of this key prefix that has any key (a SCAN of every node)."""
    keys = yield ScanKeys(ctx.keys.thread_scan_pattern())
    return sorted({t for k in keys if (t := ctx.keys.thread_id_from_key(k)) is not None})


def refresh_ttl(ctx: PlanContext, tk: ThreadKeys) -> Plan[None]:
    """With ``refresh_on_read``: every key of the thread that expires expires ``ttl``
    from now, in one round trip (``refresh.lua``: a thread waiting on an interrupt,
    whose keys do not expire, stays so). A Redis error is raised: the thread would
    otherwise expire while it looks read (on a read-only replica, READONLY is a passing
    state first: ``FailoverTimeoutError`` names it once ``failover_timeout`` passed)."""
    if ctx.refresh_on_read and ctx.ttl_arg:
        yield Script("refresh", tk.all(), [ctx.ttl_arg])


def _complete(
    ctx: PlanContext,
    tk: ThreadKeys,
    decoded: DecodedCheckpoint,
    blobs: Mapping[str, bytes | None],
    report: RecoveryReport | None,
) -> CheckpointTuple | DamagedCheckpoint:
    """Verify the channel values and pending writes of one checkpoint and build its tuple."""
    channel_values: dict[str, Any] = {}
    versions = decoded.checkpoint.get("channel_versions", {})
    for (channel, version), blob_field in zip(versions.items(), codec.blob_fields(ctx, decoded)):
        try:
            value = codec.open_blob(ctx, tk.thread_id, blob_field, blobs)
        except RecordDamagedError as exc:
            reason = f"{exc.reason} channel value {channel!r}@{version}"
            if isinstance(exc, ElementDamagedError):
                # The manifest verified and so did the checkpoint: other checkpoints
                # share them. The element goes (not a missing one: nothing to move),
                # and a writer holding its bytes writes it again (elements.py).
                missing = Damage.of(exc.reason) is Damage.MISSING
                quarantine = [] if missing else [("el", exc.digest, exc.reason)]
                return DamagedCheckpoint(
                    decoded.member, decoded.checkpoint_id, tk.el, reason, quarantine
                )
            keep = Damage.of(exc.reason) is Damage.MISSING
            quarantine = [] if keep else [("bl", blob_field, exc.reason)]
            quarantine.append(("cp", decoded.member, reason))
            return DamagedCheckpoint(
                decoded.member, decoded.checkpoint_id, tk.bl, reason, quarantine
            )
        if value is not NO_VALUE:
            channel_values[channel] = value
    # A task whose writes are not all intact must run again as a whole: keeping its
    # other writes would mark it done and lose what the damaged one carried.
    opened: list[tuple[str, str, Any]] = []
    damaged: dict[str, str] = {}  # write member -> reason
    damaged_tasks: dict[str, str] = {}
    for raw_member, record in decoded.writes:
        try:
            write_member = as_text(raw_member)
            task_id = ctx.keys.parse_write_member(write_member).task_id
        except ValueError:  # not a member this saver wrote: drop it from the index
            decoded.dropped_writes.append(("wr", raw_member, MALFORMED))
            continue
        try:
            channel, value = codec.open_write(ctx, tk.thread_id, write_member, record, blobs)
        except (RecordDamagedError, ValueError) as exc:
            damaged[write_member] = getattr(exc, "reason", "undecodable body")
            damaged_tasks.setdefault(task_id, damaged[write_member])
            continue
        opened.append((task_id, channel, value))
    pending: list[PendingWrite] = [w for w in opened if w[0] not in damaged_tasks]
    for task_id, reason in damaged_tasks.items():
        _drop_task_writes(ctx, tk, decoded, task_id, reason, damaged, report)
    return CheckpointTuple(
        config=checkpoint_config(tk.thread_id, decoded.checkpoint_ns, decoded.checkpoint_id),
        checkpoint={**decoded.checkpoint, "channel_values": channel_values},  # type: ignore[typeddict-item]
        metadata=decoded.metadata,
        parent_config=(
            checkpoint_config(tk.thread_id, decoded.checkpoint_ns, decoded.parent_id)
            if decoded.parent_id
            else None
        ),
        pending_writes=pending,
    )


def _drop_task_writes(
    ctx: PlanContext,
    tk: ThreadKeys,
    decoded: DecodedCheckpoint,
    task_id: str,
    reason: str,
    damaged: Mapping[str, str],
    report: RecoveryReport | None,
) -> None:
    """Drop (and queue for quarantine) every pending write of a task with a damaged one."""
    logger.warning(
        "langgraph-durable: dropped the pending writes of task %s of checkpoint %s "
        "(thread %r), which will run again: %s",
        task_id,
        decoded.checkpoint_id,
        tk.thread_id,
        reason,
    )
    for raw_member, _ in decoded.writes:
        write_member = member_label(raw_member)
        if task_of(ctx.keys, write_member) == task_id:
            why = damaged.get(write_member) or f"sibling of a damaged write: {reason}"
            decoded.dropped_writes.append(("wr", write_member, why))
    if report is not None:
        report.dropped_writes.append(
            SkippedCheckpoint(decoded.checkpoint_id, tk.wr, f"task {task_id}: {reason}")
        )


def read(
    ctx: PlanContext,
    tk: ThreadKeys,
    args: list[Any],
    wanted: Callable[[DecodedCheckpoint], bool] | None = None,
    report: RecoveryReport | None = None,
    guess: Sequence[str] = (),
    guess_elements: Sequence[bytes] = (),
    remember: bool = False,
    recall: bool = False,
    head: tuple[str, list[Any]] | None = None,
) -> Plan[tuple[list[CheckpointTuple | DamagedCheckpoint], list[str]]]:
    """Read checkpoints: records and writes, then the channel values they name.

    The values of ``guess`` (blob fields) and the elements of ``guess_elements``
    (digests) are read in the same round trip as the records; when they are all the
    checkpoints need, that is the only round trip. With ``recall``, the blob fields
    of every checkpoint read whole are remembered (``recent.py``: the guess of a
    later page; not for reads that jump back in time or walk every thread); with
    ``remember``, the first is remembered as the newest of its namespace.
    Returns the results in index order, and the cursor of every checkpoint the index
    returned (matching ``wanted`` or not), oldest last, the next page starting below
    the last: its id, or for a walk of every namespace (mode "all"), its timeline
    member (``keys.py``). ``head``: (a namespace's head field, a list the head record
    read in the same round trip is appended to: heads.py).
    """
    entries, blobs = yield from read_entries(ctx, tk, args, guess, guess_elements, head)
    decoded = [codec.decode_entry(ctx, tk, entry) for entry in entries]
    selected = [
        d for d in decoded if isinstance(d, DamagedCheckpoint) or wanted is None or wanted(d)
    ]
    fields = sorted(
        {f for d in selected if isinstance(d, DecodedCheckpoint) for f in codec.blob_fields(ctx, d)}
        - blobs.keys()
    )
    # The values, then the elements of their manifests and of the pending writes'.
    complete = [d for d in selected if isinstance(d, DecodedCheckpoint)]
    yield from values.read_values(ctx, tk, fields, complete, into=blobs)
    missing = blobs.lacking(ctx.element_cache)
    lacking = [
        d
        for d in selected
        if isinstance(d, DecodedCheckpoint)
        and (
            missing.intersection(codec.blob_fields(ctx, d))
            or missing.intersection(member_label(m) for m, _ in d.writes)
        )
    ]
    if lacking:  # damage, or deleted between the two reads? (recheck_values.lua)
        wanted_fields = sorted(missing.intersection(blobs))
        stored, rechecked = yield Script(
            "recheck_values",
            tk.all(),
            [len(lacking), *(d.member for d in lacking), *wanted_fields],
        )
        vanished = {d.member for d, still in zip(lacking, stored) if not int(still)}
        selected = [
            d for d in selected if not (isinstance(d, DecodedCheckpoint) and d.member in vanished)
        ]
        blobs.update((f, v) for f, v in zip(wanted_fields, rechecked) if v)
    results = [
        d if isinstance(d, DamagedCheckpoint) else _complete(ctx, tk, d, blobs, report)
        for d in selected
    ]
    if remember or recall:
        _remember(ctx, tk, selected, results, blobs, newest=remember, recall=recall)
    damaged = [r for r in results if isinstance(r, DamagedCheckpoint)]
    dropped = [w for d in selected if isinstance(d, DecodedCheckpoint) for w in d.dropped_writes]
    if (damaged or dropped) and ctx.repair_on_read:
        yield from _quarantine(ctx, tk, damaged, dropped)
    return results, [
        entry[4] if len(entry) > 4 else d.checkpoint_id for entry, d in zip(entries, decoded)
    ]


def _remember(
    ctx: PlanContext,
    tk: ThreadKeys,
    selected: Sequence[DecodedCheckpoint | DamagedCheckpoint],
    results: Sequence[CheckpointTuple | DamagedCheckpoint],
    blobs: ValueRecords,
    newest: bool,
    recall: bool,
) -> None:
    """With ``recall``, remember the blob fields of every checkpoint read whole (the
    guess of a later ``list`` page or read by id: ``recent.py``); with ``newest``, the
    first as the newest of its namespace (``newest.py``)."""
    for d, result in zip(selected, results):
        if not isinstance(d, DecodedCheckpoint) or not isinstance(result, CheckpointTuple):
            continue
        fields = codec.blob_fields(ctx, d)
        if recall:
            ctx.recent_fields.recall(tk.thread_id, d.checkpoint_ns, d.checkpoint_id, fields)
        if newest:
            newest = False
            versions = d.checkpoint.get("channel_versions", {})
            manifests = {
                channel: blobs.manifests[f]
                for channel, f in zip(versions, fields)
                if f in blobs.manifests
            }
            ctx.newest_versions.remember(
                (tk.thread_id, d.checkpoint_ns), versions, d.checkpoint_id, manifests
            )


def read_entries(
    ctx: PlanContext,
    tk: ThreadKeys,
    args: list[Any],
    guess: Sequence[str] = (),
    guess_elements: Sequence[bytes] = (),
    head: tuple[str, list[Any]] | None = None,
) -> Plan[tuple[list[Any], ValueRecords]]:
    """The read script's entries, and the values of ``guess`` and the elements of
    ``guess_elements`` read in the same round trip. Not in MULTI, which Redis refuses
    when out of memory: a value deleted between the two is told from damage by
    ``read``."""
    script = Script("read_checkpoints", tk.all(), args)
    head_read = [("HGET", tk.head, head[0])] if head is not None else []
    for attempt in (1, 2):
        if not guess and not guess_elements and not head_read:
            wrongtype, unindexed, *entries = yield script
            replies: list[Any] = []
        else:
            reply, *replies = yield Batch(
                [script, *values.value_reads(tk, guess, guess_elements), *head_read],
                errors_as_values=True,
            )
            if isinstance(reply, Exception):
                raise reply_codes.typed(ctx.keys, script, reply)
            if head is not None:
                head[1].append(replies.pop())
            wrongtype, unindexed, *entries = reply
        values.log_wrongtype(tk, wrongtype)
        if not unindexed or attempt == 2 or not (yield from reindex(ctx, tk, unindexed)):
            break
    return entries, values.from_replies(tk, guess, guess_elements, replies)


def reindex(ctx: PlanContext, tk: ThreadKeys, unindexed: Sequence[bytes | str]) -> Plan[bool]:
    """Put back the index members of records an index lacks (its key was evicted or
    lost in a bad restore), so no checkpoint or pending write silently vanishes.
    True when members were put back: the caller reads again. A read that may not
    write (``repair_on_read=False``, a read-only replica or ACL user) logs instead."""
    kinds = ", ".join(member_label(k) for k in unindexed)
    if ctx.repair_on_read:
        (added,) = yield Batch(
            [Script("reindex", tk.with_twins(), [ctx.ttl_arg])],
            errors_as_values=True,
            best_effort=True,
        )
        if not isinstance(added, Exception):
            logger.error(
                "langgraph-durable: index %s of thread %r lacked %d stored records "
                "(evicted or lost in a restore?): put back",
                kinds,
                tk.thread_id,
                added,
            )
            return bool(added)
    logger.error(
        "langgraph-durable: index %s of thread %r lacks stored records (evicted or lost "
        "in a restore?): they are not read until `langgraph-durable verify --repair`",
        kinds,
        tk.thread_id,
    )
    return False


def _quarantine(
    ctx: PlanContext,
    tk: ThreadKeys,
    damaged: Iterable[DamagedCheckpoint],
    dropped_writes: Iterable[tuple[str, str, str]] = (),
) -> Plan[None]:
    args: list[Any] = []
    moves = [m for damage in damaged for m in damage.quarantine] + list(dropped_writes)
    for kind, field_, reason in moves:
        damage = Damage.of(reason)
        if (kind == "cp" and damage is Damage.MISSING) or damage.may_be_configuration:
            continue  # gone already (its quarantine entry says why) / maybe not damage
        shown = field_.hex() if isinstance(field_, bytes) and kind == "el" else member_label(field_)
        args += [kind, field_, ctx.keys.quarantine_field(kind, shown), reason]
    if args:
        # Best effort: a read must not fail because Redis refuses writes (out of
        # memory, a read-only replica or ACL user); the damage is skipped either way.
        script = Script("quarantine", tk.with_twins(), [ctx.ttl_arg, *args])
        (reply,) = yield Batch([script], errors_as_values=True, best_effort=True)
        if isinstance(reply, Exception):
            logger.warning(
                "langgraph-durable: could not quarantine damaged records of thread %r: %s",
                tk.thread_id,
                reply,
            )
        else:
            yield Note("lgd.quarantine", {"lgd.count": len(args) // 4})


def damage_note(damage: DamagedCheckpoint) -> Note:
    """The telemetry event of a damaged checkpoint a read skipped."""
    return Note(
        "lgd.record.damaged",
        {"lgd.checkpoint_id": damage.checkpoint_id, "lgd.reason": damage.reason},
    )


def log_damage(tk: ThreadKeys, damage: DamagedCheckpoint, *, level: int) -> None:
    logger.log(
        level,
        "langgraph-durable: skipped damaged checkpoint %s of thread %r: %s (%s)",
        damage.checkpoint_id,
        tk.thread_id,
        damage.reason,
        damage.key,
    )
