"""Closing an incident: an operator acknowledges what a thread's quarantine holds.

A read or ``verify --repair`` moves damaged records to the thread's quarantine, and
``verify`` reports a thread whose quarantine holds anything as not OK: what those records
held is gone from the thread. Once someone has looked (and, say, re-run the thread from
what survived), they acknowledge it. Owns that decision. Rules it keeps:
  * The acknowledgement is recorded in the thread's record of decisions (its ledger
    hash, beside the rolled-back runs' records: ``KeySchema.ledger_ack_field``), in the
    integrity envelope: who, why, when, and which records (kind, field, why each was
    damaged). ``ledger THREAD`` and ``timeline`` show it. It expires, is deleted and
    copied with the thread's other ledger records.
  * The acknowledged records leave the quarantine in the same transaction (their bytes
    are removed; what they were is in the acknowledgement), so ``verify`` is OK again
    until the next damage, which is quarantined and reported anew. A record quarantined
    after the read that listed them stays.
  * An acknowledgement that does not verify is shown as damaged, never trusted: it
    vouches for nothing but what an operator said.
Written without a fencing token, as ``delete_for_runs`` writes: an operator's act.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import InvalidConfigError, RecordDamagedError
from langgraph_durable.core.keys import LEDGER_RECORD, KeySchema
from langgraph_durable.core.ops import Batch, Plan

logger = logging.getLogger("langgraph_durable")
_FORMAT = 1


@dataclass(frozen=True)
class Acknowledgement:
    """An operator's acknowledgement of a thread's quarantined records."""

    thread_id: str
    reason: str
    by: str | None
    at: float  # seconds since the epoch
    records: tuple[tuple[str, str, str], ...]  # (kind, field, why it was damaged)
    damage: str | None = None  # why the acknowledgement's own record did not verify


def acknowledge(
    ctx: PlanContext, thread_id: str, *, reason: str, by: str | None = None
) -> Plan[Acknowledgement]:
    """Acknowledge every record the thread's quarantine holds now (two round trips:
    read, then one transaction that records the decision and empties those fields).

    Raises:
        InvalidConfigError: ``reason`` is empty, or the quarantine holds nothing.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidConfigError("an acknowledgement needs a reason (what was looked at)")
    tk = ctx.keys.thread(str(thread_id))
    (held,) = yield Batch([("HGETALL", tk.qt)], errors_as_values=True)
    if isinstance(held, Exception) or not held:
        raise InvalidConfigError(f"nothing of thread {tk.thread_id!r} is quarantined")
    records = tuple(_described(ctx.keys, name, value) for name, value in sorted(held.items()))
    at = time.time()
    body = {"v": _FORMAT, "why": reason, "by": by, "at": at, "records": [list(r) for r in records]}
    field = KeySchema.ledger_ack_field(at)
    sealed = ctx.envelope.seal(
        KeySchema.identity(LEDGER_RECORD, tk.thread_id, field), msgpack.packb(body)
    )
    commands: list[tuple[Any, ...]] = [
        ("HSET", tk.lg, field, sealed),
        ("ZADD", tk.lgx, 0, field),
        ("HDEL", tk.qt, *held),
    ]
    if ctx.ttl_arg:
        commands += [("EXPIRE", tk.lg, ctx.ttl_arg), ("EXPIRE", tk.lgx, ctx.ttl_arg)]
    yield Batch(commands, atomic=True)
    return Acknowledgement(tk.thread_id, reason, by, at, records)


def acknowledgements(ctx: PlanContext, thread_id: str) -> Plan[list[Acknowledgement]]:
    """The thread's acknowledgements, oldest first (one round trip)."""
    tk = ctx.keys.thread(str(thread_id))
    low, high = KeySchema.ledger_ack_range()
    (fields,) = yield Batch([("ZRANGEBYLEX", tk.lgx, low, high)], errors_as_values=True)
    if isinstance(fields, Exception) or not fields:
        return []
    (stored,) = yield Batch([("HMGET", tk.lg, *fields)], errors_as_values=True)
    if isinstance(stored, Exception):
        return []
    return [opened(ctx, tk.thread_id, f, r) for f, r in zip(fields, stored)]


def opened(
    ctx: PlanContext, thread_id: str, field: bytes | str, record: bytes | None
) -> Acknowledgement:
    """The acknowledgement a record holds, verified; else one that says why not."""
    name = field.decode() if isinstance(field, bytes) else field
    try:
        raw = ctx.envelope.open(KeySchema.identity(LEDGER_RECORD, thread_id, name), record)
        body = msgpack.unpackb(raw, raw=False)
        if not isinstance(body, dict) or body.get("v") != _FORMAT:
            raise RecordDamagedError("undecodable body")
        return Acknowledgement(
            thread_id,
            str(body["why"]),
            None if body.get("by") is None else str(body["by"]),
            float(body["at"]),
            tuple((str(k), str(f), str(w)) for k, f, w in body["records"]),
        )
    except RecordDamagedError as exc:
        damage = exc.reason
    except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        damage = f"undecodable body ({type(exc).__name__})"
    logger.error(
        "langgraph-durable: an acknowledgement of thread %r is damaged (%s)", thread_id, damage
    )
    return Acknowledgement(thread_id, "", None, 0.0, (), damage=damage)


def _described(keys: KeySchema, name: bytes, value: bytes) -> tuple[str, str, str]:
    """(kind, field, why it was damaged) of one quarantine entry; what cannot be read is
    said so, never raised (the quarantine holds damage by nature)."""
    try:
        kind, field = keys.parse_quarantine_field(name)
    except (ValueError, UnicodeDecodeError):
        kind, field = "?", repr(name)
    try:  # Lua's cmsgpack packs strings raw: [reason, the record's bytes or false]
        why = msgpack.unpackb(value, raw=True)
        first = why[0] if isinstance(why, Sequence) and why else None
        reason = first.decode("utf-8", "replace") if isinstance(first, bytes) else "?"
    except (ValueError, TypeError, msgpack.UnpackException):
        reason = "?"
    return kind, field, reason
