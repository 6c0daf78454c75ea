"""Whole-thread operations: delete, copy, prune, delete by run.

Owns the operations LangGraph's contract adds beyond reads and writes. Rules it keeps:
  * ``copy_thread`` re-seals every record that verifies under the target's identity
    (records are bound to their thread) and leaves damaged ones out, logged; elements
    (elements.py), bound to their digest only, are copied as they are once verified.
  * ``delete_thread`` removes every key of the thread in one UNLINK, quarantine and
    ledger included; the guess of its newest versions is forgotten.
  * ``prune`` and ``delete_for_runs`` go through retention's guarded deletion;
    ``delete_for_runs`` visits the threads of the run index (``runs.py``), and SCANs
    only for a run the index does not know; it records the rollback in each thread's
    ledger first (``core/ledger_rollback.py``: the runs' decisions never answer again);
    ``prune(keep_last=0)`` (or ``strategy="delete"``) deletes the threads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langgraph_durable.core import codec, elements, reads, retention
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.core.heads import KIND, MARK_PREFIX, newest_by_namespace, sealed_head
from langgraph_durable.core.keys import KeySchema, ThreadKeys
from langgraph_durable.core.ledger_rollback import void_runs
from langgraph_durable.core.ops import Batch, Plan, Script
from langgraph_durable.core.records import member_label, wrong_type_as_empty

logger = logging.getLogger("langgraph_durable")


def delete_thread(ctx: PlanContext, thread_id: str) -> Plan[None]:
    thread_id = str(thread_id)
    ctx.newest_versions.forget(thread_id)
    ctx.recent_fields.forget(thread_id)
    ctx.run_index.forget(thread_id)
    tk = ctx.keys.thread(thread_id)
    # Its runs: those of its checkpoints and ledger entries, and those rolled back
    # (their runs members are gone, their void records say them).
    run_ids, voids, unlinked = yield Batch(
        [
            ("HVALS", tk.runs),
            ("ZRANGEBYLEX", tk.lgx, *ctx.keys.ledger_void_range()),
            ("UNLINK", *tk.with_twins()),
        ],
        errors_as_values=True,
    )
    if isinstance(unlinked, Exception):
        raise unlinked
    runs = {member_label(r) for r in run_ids} if isinstance(run_ids, list) else set()
    if isinstance(voids, list):  # a damaged key: its entries stay, harmless
        runs |= {r for r in map(ctx.keys.ledger_void_run, voids) if r is not None}
    if runs:
        yield Batch(
            [],
            ahead=tuple(("SREM", ctx.keys.run(r), thread_id) for r in sorted(runs)),
        )


def copy_thread(ctx: PlanContext, source_thread_id: str, target_thread_id: str) -> Plan[None]:
    """Copy every checkpoint (the whole parent chain), write, value and tool-ledger
    entry that verifies.

    Records are re-sealed under the target's identity; damaged ones are not copied.
    """
    src = ctx.keys.thread(str(source_thread_id))
    dst = ctx.keys.thread(str(target_thread_id))
    replies = yield Batch(
        [
            ("HGETALL", src.cp),
            ("HGETALL", src.wr),
            ("HGETALL", src.bl),
            ("HGETALL", src.runs),
            ("HGETALL", src.lg),
            ("HGETALL", src.el),
            ("PTTL", src.cp),
            ("HGETALL", src.head),
            ("ZRANGE", src.cps, 0, -1),
            ("ZRANGE", src.wix, 0, -1),
        ],
        errors_as_values=True,
    )
    *replies, source_ttl, source_heads, cp_index, write_index = replies
    (cps, wrs, bls, runs, lgs, els), wrong = wrong_type_as_empty(replies, ({},) * 6)
    for i in wrong:
        logger.error(
            "langgraph-durable: copy_thread %r -> %r left out %s, which holds the "
            "wrong type (damaged)",
            src.thread_id,
            dst.thread_id,
            (src.cp, src.wr, src.bl, src.runs, src.lg, src.el)[i],
        )
    for kind, index, records in (("checkpoints", cp_index, cps), ("writes", write_index, wrs)):
        lost = [m for m in index if m not in records] if isinstance(index, list) else []
        if lost:  # reads of the source report them too (damage: index without record)
            logger.warning(
                "langgraph-durable: copy_thread %r -> %r left out %d %s the index names "
                "whose records are missing",
                src.thread_id,
                dst.thread_id,
                len(lost),
                kind,
            )
    copied_cps: list[Any] = []
    copied_wrs: list[Any] = []
    copied_bls: list[Any] = []
    copied_lgs: list[Any] = []
    for kind, records, out in (
        ("cp", cps, copied_cps),
        ("wr", wrs, copied_wrs),
        ("bl", bls, copied_bls),
        ("lg", lgs, copied_lgs),
    ):
        for raw_field, record in sorted(records.items()):
            field_ = member_label(raw_field)  # a non-UTF-8 field cannot verify: left out below
            try:
                body = ctx.envelope.open(KeySchema.identity(kind, src.thread_id, field_), record)
            except RecordDamagedError as exc:
                logger.warning(
                    "langgraph-durable: copy_thread %r -> %r left out a damaged record %s: %s",
                    src.thread_id,
                    dst.thread_id,
                    field_,
                    exc.reason,
                )
                continue
            out += [
                field_,
                ctx.envelope.seal(KeySchema.identity(kind, dst.thread_id, field_), body),
            ]
            if kind == "cp":
                out.append(runs.get(raw_field, b""))
    if not copied_cps and not copied_lgs:
        return
    # Elements are verified by their digest and are the same bytes in any thread.
    copied_els: list[Any] = []
    for raw_digest, stored in sorted(els.items()):
        try:
            elements.unpack(raw_digest, stored, ctx.element_keys)
        except RecordDamagedError:
            continue  # a manifest naming it reads as damaged, as in the source
        copied_els += [raw_digest, stored]
    # The runs that recorded ledger entries (keys.ledger_run_member) go along.
    ledger_runs = {
        member_label(m): member_label(r)
        for m, r in runs.items()
        if member_label(m) == ctx.keys.ledger_run_member(member_label(r))
    }
    # The copy expires as the source does: a source waiting on an interrupt() has no
    # expiry until its next checkpoint (see _prelude.lua arm), and neither has its copy.
    waiting = bool(ctx.ttl) and source_ttl == -1
    newest = newest_by_namespace(ctx.keys, copied_cps[0::3])  # the copy's heads
    heads = [
        x
        for ns, checkpoint_id in sorted(newest.items())
        for x in sealed_head(ctx.envelope, dst.thread_id, ns, checkpoint_id)
    ]
    heads = heads if ctx.envelope.signed else []
    heads += _copied_marks(ctx, src.thread_id, dst.thread_id, source_heads)
    restore = Script(
        "restore_records",
        dst.with_twins(),
        [
            "persist" if waiting else ctx.ttl_arg,
            len(ledger_runs),
            *[x for pair in sorted(ledger_runs.items()) for x in pair],
            len(heads) // 2,
            *heads,
            len(copied_cps) // 3,
            len(copied_wrs) // 2,
            len(copied_lgs) // 2,
            len(copied_bls) // 2,
            *copied_cps,
            *copied_wrs,
            *copied_lgs,
            *copied_bls,
            *copied_els,
        ],
    )
    # The copy's checkpoints keep their run ids: their runs' index learns the copy.
    copied_runs = {member_label(r) for r in copied_cps[2::3] if r} | set(ledger_runs.values())
    ahead = tuple(
        command
        for run_id in sorted(copied_runs)
        for command in ctx.run_index.ahead(run_id, dst.thread_id, again=True)
    )
    yield Batch([restore], ahead=ahead)


def _copied_marks(ctx: PlanContext, source: str, target: str, heads: Any) -> list[Any]:
    """The source's ledger marks (heads.py), re-sealed for the copy: those that
    verify."""
    if not ctx.envelope.signed or not isinstance(heads, dict):
        return []
    out: list[Any] = []
    for raw_field, record in sorted(heads.items()):
        field_ = member_label(raw_field)
        if not field_.startswith(MARK_PREFIX):
            continue
        try:
            body = ctx.envelope.open(KeySchema.identity(KIND, source, field_), record)
        except RecordDamagedError:
            continue  # left out: the copy's entry has no mark, as before marks
        out += [field_, ctx.envelope.seal(KeySchema.identity(KIND, target, field_), body)]
    return out


def delete_for_runs(ctx: PlanContext, run_ids: Sequence[str]) -> Plan[None]:
    wanted_runs = {str(r) for r in run_ids}
    if not wanted_runs:
        return
    thread_ids: set[str] = set()
    indexed: dict[str, set[str]] = {}  # thread -> the wanted runs whose index names it
    complete: bool | None = None  # whether every thread is indexed (runs.py)
    for run_id in sorted(wanted_runs):
        (members,) = yield Batch([("SMEMBERS", ctx.keys.run(run_id))], errors_as_values=True)
        if isinstance(members, Exception) or not members:
            if complete is None:
                marker = yield Batch(
                    [("EXISTS", ctx.keys.run_index_marker())], errors_as_values=True
                )
                complete = marker[0] == 1
            if complete and not isinstance(members, Exception):
                continue  # a run that wrote nothing
            # Unknown to an index that may lack threads written before it: SCAN.
            if not thread_ids:
                thread_ids = set((yield from reads.all_thread_ids(ctx)))
            continue
        for member in members:
            indexed.setdefault(member_label(member), set()).add(run_id)
    visited = set(thread_ids | indexed.keys())
    trusted = True
    for thread_id in sorted(visited):
        named = indexed.get(thread_id, set())
        exists = yield from _roll_back(ctx, thread_id, wanted_runs, named)
        trusted = trusted and exists
    if not trusted and not thread_ids:
        # The index names a thread that does not exist (a member damaged; a deleted
        # thread leaves its runs' sets): it may lack others too. Unsigned, it is no
        # proof: SCAN. (A thread the run left nothing in, pruned or rolled back
        # before, is no sign of damage.)
        logger.warning(
            "langgraph-durable: the run index of %s names a thread that does not "
            "exist: searching every thread",
            sorted(wanted_runs),
        )
        for thread_id in sorted(set((yield from reads.all_thread_ids(ctx))) - visited):
            yield from _roll_back(ctx, thread_id, wanted_runs, set())


def _roll_back(
    ctx: PlanContext, thread_id: str, wanted_runs: set[str], named: set[str]
) -> Plan[bool]:
    """Roll the ``wanted_runs`` back in one thread (``named``: those the run index says
    wrote to it). False if the thread does not exist."""
    tk = ctx.keys.thread(thread_id)
    of_run = yield from _runs_of(ctx, tk)
    traces = set(of_run.values()) & wanted_runs
    if not traces and not of_run:
        (exists,) = yield Batch([("EXISTS", *tk.all())], errors_as_values=True)
        if exists == 0:
            return False  # no such thread: nothing to roll back, nothing to create
    doomed = {m for m, r in of_run.items() if r in wanted_runs}
    # The ledger first, also where the run saved no checkpoint (it may have recorded
    # calls, or be writing still): once the checkpoints are gone a retried rollback
    # would not find the thread's runs in its runs hash again.
    if traces | named:
        yield from void_runs(ctx, tk, traces | named)
    if doomed:
        yield from retention.collect(ctx, tk, lambda decoded, pinned: doomed)
    return True


def _runs_of(ctx: PlanContext, tk: ThreadKeys) -> Plan[dict[str, str]]:
    """Checkpoint (and ledger run) member -> run id. The ``runs`` hash says it, and so
    does each checkpoint record's metadata, which wins: the hash is unsigned (damaged,
    an older copy, another type), and a rollback must not keep a cancelled run's
    checkpoints because of it."""
    runs, records = yield Batch([("HGETALL", tk.runs), ("HGETALL", tk.cp)], errors_as_values=True)
    of_run = (
        {member_label(m): member_label(r) for m, r in runs.items()}
        if isinstance(runs, dict)
        else {}
    )
    for raw_member, record in records.items() if isinstance(records, dict) else ():
        member = member_label(raw_member)
        try:  # the metadata only: the checkpoint is not needed
            *_, meta_type, meta_data = codec.open_record(ctx, "cp", tk.thread_id, member, record)
            metadata = codec.load_value(ctx, meta_type, meta_data)
        except (RecordDamagedError, ValueError):
            continue  # damaged: its runs entry (if any) decides
        run_id = metadata.get("run_id") if isinstance(metadata, dict) else None
        if run_id:
            of_run[member] = str(run_id)
    return of_run


def index_runs(ctx: PlanContext) -> Plan[int]:
    """Once per key prefix (``setup()``): put every thread into its runs' sets, then
    mark the prefix indexed (runs.py). Returns the threads indexed; 0 when marked
    already. Best effort: a refusal (a read-only user or replica) leaves it unmarked."""
    marker = ctx.keys.run_index_marker()
    (done,) = yield Batch([("EXISTS", marker)], errors_as_values=True)
    if isinstance(done, Exception) or done:
        return 0
    indexed = 0
    for thread_id in (yield from reads.all_thread_ids(ctx)):
        (run_ids,) = yield Batch(
            [("HVALS", ctx.keys.thread(thread_id).runs)], errors_as_values=True
        )
        if isinstance(run_ids, list) and run_ids:
            ahead = tuple(
                command
                for run_id in sorted({member_label(r) for r in run_ids})
                for command in ctx.run_index.ahead(run_id, thread_id, again=True)
            )
            yield Batch([], ahead=ahead)
            indexed += 1
    yield Batch([("SET", marker, "1")], errors_as_values=True)
    return indexed


def prune(
    ctx: PlanContext,
    thread_ids: Sequence[str],
    *,
    strategy: str = "keep_latest",
    keep_last: int | None = None,
) -> Plan[None]:
    keep = _keep_count(strategy, keep_last)
    for thread_id in thread_ids:
        if keep == 0:
            yield from delete_thread(ctx, thread_id)
            continue
        tk = ctx.keys.thread(str(thread_id))
        yield from retention.collect(
            ctx,
            tk,
            lambda decoded, pinned: retention.prunable(decoded, keep, pinned),
            pin_valid=True,
        )


def _keep_count(strategy: str, keep_last: int | None) -> int:
    """How many checkpoints of each namespace ``prune`` keeps; 0 deletes the thread. As
    langgraph-checkpoint-redis: ``keep_last``, when given, wins over ``strategy``
    (``"keep_latest"`` keeps 1, ``"delete"`` keeps 0)."""
    if strategy not in ("keep_latest", "delete", "delete_all"):
        raise ConfigurationError(
            f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'"
        )
    if keep_last is None:  # "delete_all": LangGraph Server's name for it (thread TTL sweeps)
        return 1 if strategy == "keep_latest" else 0
    if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
        raise ConfigurationError(f"keep_last must be an integer >= 0, got {keep_last!r}")
    return keep_last
