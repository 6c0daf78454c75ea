"""The ledger's records in Redis: read a place's entries, write entries.

Owns the ledger's Redis conversation (``ledger_read.lua``, ``ledger_write.lua``): one
read per task attempt, which also brings what ``executions.py`` needs to tell which
execution the attempt belongs to (the starting checkpoints still saved, the runs rolled
back), and one write per change. Rules it keeps:
  * Nothing in a record is used before it verifies (``entries.open_entry``); a read
    also finds entries whose index member was lost and puts the index back together.
  * Every write carries this context's fencing token, like checkpoint writes; a damaged
    record that is replaced goes to the quarantine first.
  * A write of a run's entries adds the thread to the run's index in the same round
    trip, so a rollback finds it even if the run saved no checkpoint (``rollback.py``).
  * A write decided from a read names the records it was decided from (``read_as``);
    the server refuses it, writing nothing, if one is no longer there as read (nor
    already what this write stores: the same write sent again after a failover), and
    ``write`` raises ``Changed``: the read came from a server that had not seen the
    latest write (a demoted primary still serving what it held, a partition that
    healed) or another worker wrote since. The caller reads again and decides anew.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from langgraph_durable.core.fencing import held_token, this_worker
from langgraph_durable.core.heads import REPLAYED, ledger_mark
from langgraph_durable.core.keys import LEDGER_RECORD
from langgraph_durable.core.ledger_rollback import voided_runs
from langgraph_durable.core.ops import Plan, Script
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.entries import (
    DAMAGED,
    LedgerEntry,
    open_entry,
    sealed_entry,
)
from langgraph_durable.ledger.executions import (
    Lineage,
    executions,
    judge,
    new_name,
)
from langgraph_durable.ledger.sites import TaskContext

logger = logging.getLogger("langgraph_durable")


class Changed(Exception):
    """A write refused: the record of ``field`` is no longer the one its decision was
    made from (module docstring). Internal: the plans that write read again."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def expected(entry: LedgerEntry | None) -> str:
    """What a write made from ``entry`` (None: no record was found) expects to find:
    the SHA-1 of the record read, or "" for none."""
    return "" if entry is None else entry.seen or ""


@dataclass
class _Read:
    """What one ledger read found (``read``)."""

    entries: list[LedgerEntry]
    damaged: bool  # a ledger key was ever moved aside: entries may be missing
    unindexed: list[bytes]
    saved: set[str]  # starting checkpoints of the place's executions still saved
    voided: set[str]  # runs rolled back


def read(
    lctx: LedgerContext,
    thread_id: str,
    bounds: tuple[str, str],
    prefix: str = "",
    start_member: str = "",
) -> Plan[_Read]:
    """Entries within ``bounds`` (whose fields start with ``prefix``), also those whose
    index member was lost; whether the ledger was ever damaged; the fields of those
    the index lost (``load`` re-indexes them). With ``start_member`` (one task's
    read), also which executions' starting checkpoints are saved, and the runs rolled
    back (executions.py)."""
    tk = lctx.keys.thread(thread_id)
    void_min, void_max = lctx.keys.ledger_void_range()
    wrongtype, damaged, flat, unindexed, saved, voids, marks = yield Script(
        "ledger_read", tk.with_twins(), [*bounds, "", prefix, start_member, void_min, void_max]
    )
    if wrongtype:
        logger.error(
            "langgraph-durable: ledger keys of thread %r hold the wrong type: %s",
            thread_id,
            [k.decode() if isinstance(k, bytes) else k for k in wrongtype],
        )
    entries = []
    marked = dict(zip(marks[0::2], marks[1::2]))
    core = lctx.core
    for i in range(0, len(flat), 2):
        if lctx.keys.ledger_void_run(flat[i]) is not None:
            voids += flat[i : i + 2]  # a whole-ledger read holds them among the entries
            continue
        if lctx.keys.is_ledger_ack(flat[i]):  # an operator's (core/incidents.py)
            continue
        try:
            entry = open_entry(core, thread_id, flat[i], flat[i + 1] or None, marked.get(flat[i]))
        except (ValueError, UnicodeDecodeError):  # not a field we wrote
            logger.error("langgraph-durable: malformed ledger field %r", flat[i])
            continue
        if entry.damage == REPLAYED:
            logger.error(
                "langgraph-durable: ledger entry %r of thread %r is %s",
                entry.field,
                thread_id,
                REPLAYED,
            )
        entries.append(entry)
    if unindexed:
        logger.error(
            "langgraph-durable: the ledger index of thread %r lost %d entries whose "
            "records are still there (eviction, a bad restore?): read from the records",
            thread_id,
            len(unindexed),
        )
        entries.sort(key=lambda e: e.field)  # in index order, as if nothing was lost
    voided = voided_runs(lctx.core, thread_id, voids)
    if voided:
        entries = [replace(e, rolled_back=e.run_id in voided) for e in entries]
    saved_starts = {_text(s) for s in saved}
    return _Read(entries, bool(damaged), list(unindexed), saved_starts, voided)


def write(
    lctx: LedgerContext,
    thread_id: str,
    entries: Iterable[LedgerEntry],
    replacing: Iterable[LedgerEntry] = (),
    settle: Iterable[LedgerEntry] = (),
    read_as: dict[str, LedgerEntry | None] | None = None,
) -> Plan[list[LedgerEntry]]:
    """Store entries; the bytes of any damaged record they replace go to quarantine.
    ``settle``: settled copies of model answers, each written only if its record is
    still the one the copy was made from (``ledger_settle.lua``). ``read_as``: by
    field, the entry the write was decided from (None: none was found); if one is no
    longer there as read, nothing is written and ``Changed`` is raised. Returns the
    entries as written (``seen`` set)."""
    entries = list(entries)
    tk = lctx.keys.thread(thread_id)
    core = lctx.core
    token = held_token(lctx.keys.prefix, thread_id)
    damaged = {e.field: e.damage for e in replacing if e.state == DAMAGED}
    args: list[Any] = [core.ttl_arg, token]
    run_ids: set[str] = set()
    written = []
    worker = this_worker()
    for entry in entries:
        entry = replace(entry, worker=worker)
        if entry.run_id:
            run_ids.add(entry.run_id)
        reason = damaged.get(entry.field) or ""
        record, body = sealed_entry(core, thread_id, entry)
        args += [
            entry.field,
            record,
            lctx.keys.quarantine_field(LEDGER_RECORD, entry.field) if reason else "",
            reason,
            *ledger_mark(core.envelope, thread_id, entry.field, body),  # heads.py
        ]
        written.append(replace(entry, seen=hashlib.sha1(record).hexdigest()))
    settling: list[Any] = [core.ttl_arg, token]
    for entry in settle:
        if entry.seen is not None:
            record, body = sealed_entry(core, thread_id, entry)
            mark = ledger_mark(core.envelope, thread_id, entry.field, body)
            settling += [entry.field, entry.seen, record, *mark]
    # Each run goes in the thread's runs hash too (keys.py): delete_thread finds every
    # run whose index set names the thread.
    runs = [x for r in sorted(run_ids) for x in (lctx.keys.ledger_run_member(r), r)]
    # What each guarded field was read as, and what this write stores there: the same
    # write sent again after a lost reply finds its own record, and goes through.
    stores = {e.field: e.seen for e in written}
    guards = [x for f, e in (read_as or {}).items() for x in (f, expected(e), stores.get(f, ""))]
    args[2:2] = [len(runs) // 2, *runs, len(guards) // 3, *guards]
    commands = [Script("ledger_write", tk.with_twins(), args)] if entries else []
    if len(settling) > 2:
        commands.append(Script("ledger_settle", tk.with_twins(), settling))
    if not commands:
        return written
    # A run that recorded calls is in the run index, so a rollback finds the thread
    # even if the run saved no checkpoint there (rollback.py).
    ahead = tuple(c for r in sorted(run_ids) for c in core.run_index.ahead(r, thread_id))
    replies, acked = yield from core.write_round_trip(commands, raising=True, ahead=ahead)
    if entries and replies[0] != 1:  # the field whose record is not the one read
        raise Changed(_text(replies[0]))
    core.replicated(tk, acked)
    return written


def load(lctx: LedgerContext, ctx: TaskContext, lineage: Lineage) -> Plan[None]:
    """Read the task's entries (one round trip), decide which execution the task
    attempt belongs to (executions.py) and keep that execution's entries."""
    ctx.lineage = lineage  # a write refused (Changed) reads again with it
    place = ctx.place
    got = yield from read(
        lctx,
        place.thread_id,
        lctx.keys.ledger_task_range(place.prefix),
        place.prefix,
        place.start_member,
    )
    if got.unindexed:  # put the index back together (an empty record re-indexes a field)
        token = held_token(lctx.keys.prefix, place.thread_id)
        args: list[Any] = [lctx.core.ttl_arg, token, 0, 0]
        args += [x for field in got.unindexed for x in (field, "", "", "", "", "")]
        yield Script("ledger_write", lctx.keys.thread(place.thread_id).with_twins(), args)
    found = executions(got.entries, got.voided)
    judged = judge(found, place.now, got.saved, lineage)
    chosen = judged.same
    ctx.execution = chosen.name if chosen is not None else new_name(found, place.now)
    ctx.entries = {e.field: e for e in got.entries if e.execution == ctx.execution}
    unsure = {x.name for x in judged.unsure}
    ctx.suspects = {e.field: e for e in got.entries if e.execution in unsure}
    ctx.facts = judged.facts
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "langgraph-durable: thread %r, task %s: continues %r, asks about %r, of %r",
            place.thread_id,
            place.prefix,
            ctx.execution if chosen is not None else None,
            sorted(unsure),
            {x.name: judged.facts[x.name] for x in found},
        )
    ctx.ledger_damaged = got.damaged
    for e in ctx.entries.values():
        if e.damage:
            logger.error(
                "langgraph-durable: ledger entry %r of thread %r is damaged (%s); its "
                "outcome is treated as unknown",
                e.field,
                place.thread_id,
                e.damage,
            )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
