"""``get_tuple``: the newest checkpoint that verifies, falling back past damage, reported.

Owns the fallback rule and the recovery report. Rules it keeps:
  * Without a ``checkpoint_id``, the newest checkpoint of the namespace whose every part
    verifies is returned; each damaged one skipped on the way is logged and recorded in
    a ``RecoveryReport`` (``saver.recovery_report(thread_id)``).
  * If every checkpoint was skipped for a reason that may be this reader's configuration
    (a signing key or allowlist it lacks), nothing is returned as if the thread were new:
    ``UnreadableThreadError`` says why. A run must not silently start again from step 0.
  * With an explicit ``checkpoint_id``, there is no fallback: damage raises
    ``CheckpointCorruptedError`` (a caller who names a checkpoint wants that one).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_durable.core import codec, reads
from langgraph_durable.core.context import PlanContext
from langgraph_durable.core.errors import (
    CheckpointCorruptedError,
    RecordDamagedError,
    UnreadableThreadError,
)
from langgraph_durable.core.heads import head_checkpoint, stale_reason
from langgraph_durable.core.inputs import configurable
from langgraph_durable.core.keys import ThreadKeys
from langgraph_durable.core.ops import Command, Note, Plan
from langgraph_durable.core.records import (
    Damage,
    DamagedCheckpoint,
    may_be_configuration,
    quarantine_reason,
    thread_id_of,
)
from langgraph_durable.core.reports import RecoveryReport, SkippedCheckpoint

logger = logging.getLogger("langgraph_durable")


def get_tuple(ctx: PlanContext, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    conf = configurable(config)
    if ctx.newest_only:  # a shallow saver: its one checkpoint, whatever id is asked
        found = yield from newest_only_tuple(ctx, thread_id_of(conf), conf.get("checkpoint_ns", ""))
    else:
        found = yield from _get_tuple(ctx, config)
    if found is not None:  # refresh_on_read: the thread lives on while it is looked at
        yield from reads.refresh_ttl(ctx, ctx.keys.thread(thread_id_of(conf)))
    return found


def newest_only_tuple(ctx: PlanContext, thread_id: str, ns: str) -> Plan[CheckpointTuple | None]:
    """A shallow saver's one checkpoint of a namespace (``newest_only``): the newest
    that verifies, with no parent, as LangGraph's ShallowPostgresSaver and
    langgraph-checkpoint-redis's ShallowRedisSaver return it, whatever retention has
    not yet collected."""
    found = yield from _get_tuple(
        ctx, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    )
    return None if found is None else found._replace(parent_config=None)


def _get_tuple(ctx: PlanContext, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    conf = configurable(config)
    thread_id = thread_id_of(conf)
    ns = conf.get("checkpoint_ns", "")
    tk = ctx.keys.thread(thread_id)
    checkpoint_id = conf.get("checkpoint_id")
    if checkpoint_id:
        member = ctx.keys.checkpoint_member(ns, checkpoint_id)
        guess = ctx.recent_fields.of(thread_id, ns, checkpoint_id)
        results, _ = yield from reads.read(ctx, tk, ["members", member], guess=guess)
        if not results:  # deleted while it was read (retention, delete_thread)
            return None
        result = results[0]
        if isinstance(result, DamagedCheckpoint):
            if Damage.of(result.reason) is Damage.MISSING and result.key == tk.cp:
                # Never stored, deleted, or quarantined by an earlier read: only the
                # last one is damage, and the quarantine remembers why.
                quarantined = yield Command(
                    ("HGET", tk.qt, ctx.keys.quarantine_field("cp", member))
                )
                if quarantined is None:
                    return None
                result.reason = f"quarantined: {quarantine_reason(quarantined)}"
            raise CheckpointCorruptedError(
                thread_id=thread_id,
                checkpoint_ns=ns,
                checkpoint_id=checkpoint_id,
                key=result.key,
                reason=result.reason,
            )
        return result
    report = RecoveryReport(thread_id, ns)
    before: str | None = None
    # A signed namespace's head, read with its newest checkpoint (heads.py).
    head: tuple[str, list[Any]] | None = (
        (ctx.keys.head_field(ns), []) if ctx.envelope.signed else None
    )
    while True:
        upper, lower = ctx.keys.namespace_range(ns, before)
        newest = ctx.newest_versions.entry((thread_id, ns)) if before is None else None
        results, fetched = yield from reads.read(
            ctx,
            tk,
            ["range", upper, lower, 1],
            report=report,
            guess=codec.fields_of(ctx, ns, newest.versions) if newest else (),
            guess_elements=sorted(ctx.element_cache.uncached(newest.digests)) if newest else (),
            remember=True,
            recall=True,
            head=head if before is None else None,
        )
        if not results and fetched:
            continue  # deleted while read (retention, delete_thread): read again
        if not results:
            _check_head(ctx, tk, ns, head, None, report)
            if any(may_be_configuration(s.reason) for s in report.skipped):
                ctx.recovery_reports[(thread_id, ns)] = report
                raise UnreadableThreadError(
                    thread_id=thread_id,
                    checkpoint_ns=ns,
                    reasons={s.checkpoint_id: s.reason for s in report.skipped},
                )
            if report.skipped:
                _report(ctx, report, level=logging.ERROR)
                yield _fallback_note(report)
            return None
        result = results[0]
        if isinstance(result, DamagedCheckpoint):
            reads.log_damage(tk, result, level=logging.WARNING)
            yield reads.damage_note(result)
            report.skipped.append(
                SkippedCheckpoint(result.checkpoint_id, result.key, result.reason)
            )
            before = result.checkpoint_id
            continue
        _check_head(ctx, tk, ns, head, result.checkpoint["id"], report)
        if report.skipped or report.dropped_writes:
            report.used_checkpoint_id = result.checkpoint["id"]
            report.recovered_from_step = result.metadata.get("step")
            _report(ctx, report, level=logging.WARNING)
            if report.skipped:
                yield _fallback_note(report)
        return result


def _check_head(
    ctx: PlanContext,
    tk: ThreadKeys,
    ns: str,
    head: tuple[str, list[Any]] | None,
    found_id: str | None,
    report: RecoveryReport,
) -> None:
    """Report what the namespace's signed head says is missing: a newer checkpoint
    than ``found_id`` (not damage already reported), or the head itself (heads.py)."""
    if head is None or not head[1]:
        return
    record = head[1][0]
    skipped = {s.checkpoint_id for s in report.skipped}
    if record is None or isinstance(record, Exception):
        if found_id is None and not skipped:
            return  # a namespace with no checkpoint has no head
        why = "missing" if record is None else "wrong type"
        reason = f"{why}: the signed head of the namespace (resign writes one)"
        report.skipped.append(SkippedCheckpoint("", tk.head, reason))
        return
    try:
        head_id = head_checkpoint(ctx.envelope, tk.thread_id, ns, record)
    except RecordDamagedError as exc:
        report.skipped.append(SkippedCheckpoint("", tk.head, f"{exc.reason} (signed head)"))
        return
    if (found_id is not None and head_id <= found_id) or head_id in skipped:
        return
    report.skipped.append(SkippedCheckpoint(head_id, tk.head, stale_reason(head_id)))


def _fallback_note(report: RecoveryReport) -> Note:
    """The telemetry event of a read that fell back past damaged checkpoints."""
    skipped = "; ".join(f"{s.checkpoint_id}: {s.reason}" for s in report.skipped)
    return Note(
        "lgd.fallback",
        {
            "lgd.used_checkpoint_id": report.used_checkpoint_id or "",
            "lgd.skipped": skipped[:1000],
            "lgd.skipped_count": len(report.skipped),
        },
    )


def _report(ctx: PlanContext, report: RecoveryReport, *, level: int) -> None:
    ctx.recovery_reports[(report.thread_id, report.checkpoint_ns)] = report
    if report.used_checkpoint_id is None and report.skipped:
        logger.log(
            level,
            "langgraph-durable: no checkpoint of thread %r (namespace %r) verifies; "
            "skipped %d damaged: the run starts again from step 0",
            report.thread_id,
            report.checkpoint_ns,
            len(report.skipped),
        )
    elif report.skipped:
        logger.log(
            level,
            "langgraph-durable: thread %r (namespace %r) recovered from checkpoint %s "
            "(step %s) after skipping %d damaged: %s",
            report.thread_id,
            report.checkpoint_ns,
            report.used_checkpoint_id,
            report.recovered_from_step,
            len(report.skipped),
            "; ".join(f"{s.checkpoint_id}: {s.reason}" for s in report.skipped),
        )
