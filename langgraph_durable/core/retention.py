"""Retention: which checkpoints may go, and the guarded deletion that removes them.

Owns ``keep_last`` (amortized: one collection per ``keep_last/4`` puts), ``prune`` and
``delete_for_runs`` deletions, and the garbage channel values they leave. Rules it keeps:
  * Never delete what a read may need: the ``keep_last`` newest checkpoints of each
    namespace, the newest one that verifies completely (the fallback), and every
    ancestor their DeltaChannels are rebuilt from (``counters_since_delta_snapshot``;
    metadata that does not say keeps the whole chain).
  * A value is deleted only when no remaining checkpoint references it, and only when
    every checkpoint record could be read (a damaged one's references are unknown); an
    element (elements.py) only when no remaining checkpoint's manifest names it, and
    only when every value they reference could be read.
  * The deletion is guarded: ``delete_checkpoints.lua`` does nothing if a checkpoint, a
    pending write or a copy was written since it was planned (the thread's write
    generation moved: it could name a value or element planned away); the plan is made
    again (``PLAN_RETRIES`` times).
  * Tool-ledger entries no remaining checkpoint can replay go with them; which those are
    is the ledger's rule (``core/ledger_retention.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_durable.core import blocks, codec, values
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.elements import ValueRecords, may_be_manifest
from langgraph_durable.core.errors import RecordDamagedError
from langgraph_durable.core.heads import newest_by_namespace, sealed_head
from langgraph_durable.core.keys import SEP, ThreadKeys
from langgraph_durable.core.ledger_retention import forget_replayed
from langgraph_durable.core.manifests import Blocked, every_digest
from langgraph_durable.core.ops import Batch, Plan, Script
from langgraph_durable.core.records import (
    PLAN_RETRIES,
    DamagedCheckpoint,
    DecodedCheckpoint,
    member_label,
)

logger = logging.getLogger("langgraph_durable")


def collect(
    ctx: PlanContext,
    tk: ThreadKeys,
    choose: Callable[[dict[str, DecodedCheckpoint], set[str]], set[str]],
    *,
    pin_valid: bool = False,
) -> Plan[None]:
    """Delete the checkpoints ``choose`` picks, their writes, and every channel value
    no remaining checkpoint references, in one guarded script call.

    The guard makes the deletion a no-op if anything was written since it was
    planned (it may reference a value or element planned away); it is then re-planned.
    With ``pin_valid``, ``choose`` is told the newest checkpoint of each namespace that
    verifies completely, so retention never removes the last good fallback.
    """
    for _ in range(PLAN_RETRIES):
        # The generation first: a write after it voids the deletion planned here.
        generation, cps, blob_fields, element_digests = yield Batch(
            [("GET", tk.gen), ("HGETALL", tk.cp), ("HKEYS", tk.bl), ("HKEYS", tk.el)],
            errors_as_values=True,
        )
        if isinstance(generation, Exception):
            generation = b""  # the wrong type: the deletion moves it aside first
        # A key of the wrong type reads as empty, and the deletion script moves it
        # aside first; nothing it may have referenced is deleted (intact: False).
        wrong = [r for r in (cps, blob_fields, element_digests) if isinstance(r, Exception)]
        if wrong:
            logger.warning(
                "langgraph-durable: thread %r has a key of the wrong type (moved aside "
                "by this deletion); every channel value and element is kept",
                tk.thread_id,
            )
        cps = {} if isinstance(cps, Exception) else cps
        blob_fields = [] if isinstance(blob_fields, Exception) else blob_fields
        element_digests = [] if isinstance(element_digests, Exception) else element_digests
        decoded: dict[str, DecodedCheckpoint] = {}
        intact = not wrong
        for raw_member, record in cps.items():
            entry = codec.decode_entry(ctx, tk, [raw_member, record, []])
            if isinstance(entry, DamagedCheckpoint):
                intact = False  # its references are unknown: keep every value
            else:
                decoded[entry.member] = entry
        pinned = (yield from _newest_valid(ctx, tk, decoded)) if pin_valid else set()
        doomed = choose(decoded, pinned)
        referenced = {
            f for m, d in decoded.items() if m not in doomed for f in codec.blob_fields(ctx, d)
        }
        garbage = (
            [] if not intact else [f for f in blob_fields if member_label(f) not in referenced]
        )
        loose = []
        if intact and element_digests:
            named = yield from _elements_named(ctx, tk, sorted(referenced), doomed)
            loose = [] if named is None else [d for d in element_digests if d not in named]
        if not doomed and not garbage and not loose:
            return
        deleted = yield Script(
            "delete_checkpoints",
            tk.with_twins(),
            [
                ctx.ttl_arg,
                generation or b"",
                len(doomed),
                *sorted(doomed),
                len(garbage),
                *garbage,
                *_heads_after(ctx, tk, cps, doomed),
                *loose,
            ],
        )
        if deleted != -1:
            yield from _forget_ledger(ctx, tk, decoded, doomed)
            return
    logger.warning(
        "langgraph-durable: gave up pruning thread %r: it kept being written", tk.thread_id
    )


def _heads_after(ctx: PlanContext, tk: ThreadKeys, cps: Any, doomed: set[str]) -> list[Any]:
    """The head updates of a deletion (heads.py): for each namespace whose newest
    checkpoint it deletes (a rollback), the signed head naming the newest left, or ""
    where none is. Retention keeps the newest: it leaves heads alone, so it never
    writes over what a head says about checkpoints removed behind the saver's back."""
    if not ctx.envelope.signed or not doomed:
        return [0]
    top = newest_by_namespace(ctx.keys, cps)
    newest = newest_by_namespace(ctx.keys, [m for m in cps if member_label(m) not in doomed])
    touched = {ns for ns, cid in top.items() if newest.get(ns) != cid}
    updates: list[Any] = []
    for ns in sorted(touched):
        left = newest.get(ns)
        if left:
            updates += sealed_head(ctx.envelope, tk.thread_id, ns, left)
        else:
            updates += [ctx.keys.head_field(ns), ""]
    return [len(updates) // 2, *updates]


def _elements_named(
    ctx: PlanContext, tk: ThreadKeys, blob_fields: list[str], doomed: set[str]
) -> Plan[set[bytes] | None]:
    """The digests (as stored field names) of every element the manifests among
    ``blob_fields`` and among the pending writes of the checkpoints not ``doomed``
    name; None when one of them cannot be read (a missing or damaged record might
    have been a manifest: every element stays)."""
    commands = [("HGETALL", tk.wr), *([("HMGET", tk.bl, *blob_fields)] if blob_fields else [])]
    writes, *stored = yield Batch(commands, errors_as_values=True)
    if isinstance(writes, Exception) or any(isinstance(v, Exception) for v in stored):
        return None  # a key of the wrong type: what it named is unknown, all stay
    named: set[bytes] = set()
    blocked: list[Blocked] = []
    for blob_field, record in zip(blob_fields, stored[0] if stored else []):
        if record is None:
            return None
        if may_be_manifest(record):
            digests = codec.manifest_of(ctx, tk.thread_id, blob_field, record)
            if digests is None:
                return None
            if isinstance(digests, Blocked):
                blocked.append(digests)
            named.update(every_digest(digests))
    if blocked:  # what their blocks name: from Redis, each verified (blocks.py)
        block_digests = sorted({d for b in blocked for d in b.blocks})
        (found,) = yield Batch([("HMGET", tk.el, *block_digests)], errors_as_values=True)
        if isinstance(found, Exception):
            return None
        read = ValueRecords(trust_cache=False)
        read.elements.update(zip(block_digests, found))
        for b in blocked:
            try:
                named.update(blocks.expand(ctx, b, read))
            except RecordDamagedError:
                return None  # a block unread: what it names is unknown, all stay
    for raw_member, record in writes.items():
        member = member_label(raw_member)
        if member.rsplit(SEP, 3)[0] in doomed or not may_be_manifest(record, window=-1):
            continue  # a write deleted with its checkpoint, or stored whole
        digests = codec.write_manifest_of(ctx, tk.thread_id, member, record)
        if digests is None:
            return None
        named.update(digests)
    return named


def _forget_ledger(
    ctx: PlanContext, tk: ThreadKeys, decoded: dict[str, DecodedCheckpoint], doomed: set[str]
) -> Plan[None]:
    """Let the ledger drop the entries of steps no remaining root checkpoint replays
    (a replay runs the steps after the checkpoint it starts from)."""
    steps = [
        d.metadata.get("step")
        for m, d in decoded.items()
        if m not in doomed and d.checkpoint_ns == ""
    ]
    if doomed and steps and all(isinstance(s, int) for s in steps):
        yield from forget_replayed(ctx.keys, tk, ctx.ttl_arg, min(steps))  # type: ignore[type-var]


def _newest_valid(
    ctx: PlanContext, tk: ThreadKeys, decoded: dict[str, DecodedCheckpoint]
) -> Plan[set[str]]:
    """Members of the newest checkpoint per namespace whose channel values all verify
    (one HMGET per round; a second round only where the newest was damaged)."""
    queues: dict[str, list[DecodedCheckpoint]] = {}
    for d in sorted(decoded.values(), key=lambda d: d.checkpoint_id, reverse=True):
        queues.setdefault(d.checkpoint_ns, []).append(d)
    pinned: set[str] = set()
    while queues:
        candidates = {ns: queue.pop(0) for ns, queue in queues.items()}
        fields = sorted({f for d in candidates.values() for f in codec.blob_fields(ctx, d)})
        # From Redis, not this process's cache: the pin must be what any reader reads.
        found = yield from values.read_values(ctx, tk, fields, trust_cache=False)
        for ns, candidate in candidates.items():
            valid = codec.values_verify(ctx, tk, candidate, found)
            if valid:
                pinned.add(candidate.member)
            if valid or not queues[ns]:
                queues.pop(ns)
    return pinned


def prunable(decoded: dict[str, DecodedCheckpoint], keep_last: int, pinned: set[str]) -> set[str]:
    """Members to delete so each namespace keeps its ``keep_last`` newest checkpoints and
    the ``pinned`` ones, plus the ancestors (and so their writes) their DeltaChannels are
    rebuilt from."""
    by_ns: dict[str, list[DecodedCheckpoint]] = {}
    for d in decoded.values():
        by_ns.setdefault(d.checkpoint_ns, []).append(d)
    keep: set[str] = set()
    for ns_entries in by_ns.values():
        ns_entries.sort(key=lambda d: d.checkpoint_id, reverse=True)
        by_id = {d.checkpoint_id: d for d in ns_entries}
        for kept in ns_entries[:keep_last] + [d for d in ns_entries if d.member in pinned]:
            keep.add(kept.member)
            # counters_since_delta_snapshot: supersteps since each DeltaChannel's last
            # snapshot, i.e. how far up the parent chain its seed lies.
            depth = _delta_depth(kept.metadata, whole_chain=len(ns_entries))
            cursor = kept
            for _ in range(depth):
                parent = by_id.get(cursor.parent_id or "")
                if parent is None:
                    break
                keep.add(parent.member)
                cursor = parent
    return {m for m in decoded if m not in keep}


def _delta_depth(metadata: Mapping[str, Any], *, whole_chain: int) -> int:
    """How many ancestors a checkpoint's DeltaChannels are rebuilt from. Metadata that
    does not say it plainly (written by something else) keeps the whole chain: retention
    never deletes what a read may need."""
    counters = metadata.get("counters_since_delta_snapshot") or {}
    try:
        return max((int(c[1]) for c in counters.values()), default=-1) + 1
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        logger.warning(
            "langgraph-durable: unreadable counters_since_delta_snapshot %.80r: retention "
            "keeps every ancestor of the checkpoint",
            counters,
        )
        return whole_chain
