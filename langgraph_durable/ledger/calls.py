"""A recorded call's plans: the decision it makes on each attempt, its intent, its outcome.

Owns the decision each call makes on each attempt (``begin``): replay a recorded
result, run (recording its intent first), stop because its outcome is unknown and its
policy says so, or settle a call that diverged from the one recorded at its place
(``divergence.py``); and the call run between its intent and its outcome
(``recorded_run``). Rules it keeps:
  * The intent is stored, synchronously, before the tool runs; the result after it. A
    call with an intent and no result has an unknown outcome: ``retry`` runs it again
    under the same idempotency key, ``escalate`` asks a human (``interrupt()``),
    ``fail`` raises ``ToolOutcomeUnknownError``.
  * A ledger that was ever damaged makes a call with no entry an unknown outcome too
    (its entry may be what was lost).
  * An intent settles the model answers its call was made from, in the same write
    (``journal.py``).
Every plan is a function of the ledger context (``context.py``); reads and writes are
``store.py``'s. Which questions a task asks, and when, is ``escalations.py``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from langgraph.errors import GraphBubbleUp, GraphInterrupt

from langgraph_durable.core.errors import ToolOutcomeUnknownError
from langgraph_durable.core.heads import REPLAYED
from langgraph_durable.core.ops import Note, Plan
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.divergence import (
    diverged_error,
    recorded_at,
    skipped_result,
    standing_result,
    suspect_at,
)
from langgraph_durable.ledger.entries import (
    DAMAGED,
    DIVERGED,
    ERROR,
    INTENT,
    INTERRUPTED,
    RESULT,
    LedgerEntry,
    Policy,
    describe_error,
    unknown_reason,
)
from langgraph_durable.ledger.sequences import CallSequence, Invoke
from langgraph_durable.ledger.sites import (
    FALLBACK_POSITION,
    Site,
    TaskContext,
    call_at,
    canonical_args,
    current_key,
    facts,
    site_idempotency_key,
)
from langgraph_durable.ledger.store import Changed, load, write
from langgraph_durable.ledger.wiring import check_recordable


@dataclass
class CallDecision:
    """What a call does on this attempt: replay ``value``, or run under ``key`` with its
    intent ``entry`` recorded."""

    replay: bool
    value: Any = None
    key: str = ""
    entry: LedgerEntry | None = None


def as_intent(
    entry: LedgerEntry,
    thread_id: str,
    call: Mapping[str, Any] | None = None,
    **changes: Any,
) -> LedgerEntry:
    """An unknown outcome rewritten as a readable intent (a damaged record's bytes go
    to quarantine as it is replaced); a damaged record's arguments are taken from
    the AI message ``call`` whose name and arguments hash match its field."""
    if entry.state == DAMAGED:
        return replace(
            entry,
            state=INTENT,
            idempotency_key=site_idempotency_key(thread_id, entry.field),
            tool_call_id=call.get("id") if call else None,
            args=canonical_args(call.get("args", {}))[0] if call else None,
            **changes,
        )
    return replace(entry, **changes)


def begin(
    lctx: LedgerContext, ctx: TaskContext, site: Site, policy: Policy, hint: str | None = None
) -> Plan[CallDecision]:
    """Decide what a call does on this attempt; record its intent if it runs.
    ``hint``: the policy its tool's metadata gives, kept with the intent.

    The intent is written only if the call's record is still the one the decision was
    made from (``store.Changed``): a read served by a demoted primary, or before
    another worker's write, would otherwise run again a call recorded since. Refused,
    the task is read again and the call decided anew; refused twice, its outcome is
    unknown (``ToolOutcomeUnknownError``)."""
    try:
        return (yield from _begin(lctx, ctx, site, policy, hint))
    except Changed:
        yield from load(lctx, ctx, ctx.lineage)
    try:
        return (yield from _begin(lctx, ctx, site, policy, hint))
    except Changed:
        reason = "its ledger record changed twice while this worker decided"
        raise unknown(site, site.key, reason) from None


def _begin(
    lctx: LedgerContext, ctx: TaskContext, site: Site, policy: Policy, hint: str | None
) -> Plan[CallDecision]:
    if ctx.failure is not None:
        raise fresh(ctx.failure)
    entry = ctx.entries.get(site.field)
    key = site.key
    attempts = 0
    if entry is None:
        recorded = recorded_at(ctx.entries.values(), site)
        # "escalate" asked before the call began (a diverged entry): none reach here
        if recorded is not None and lctx.on_divergence != "new_call":
            raise diverged_error(site, recorded)
        suspect = suspect_at(ctx, site)
        if suspect is not None and lctx.on_divergence == "raise":
            raise diverged_error(site, suspect[0], suspect[1])
        if suspect is not None and lctx.on_divergence == "escalate" and policy == "fail":
            raise unknown(site, key, suspect[1])
        key = ctx.borrowed.get(site.field, key)
        if ctx.ledger_damaged:  # an entry of this task may have been lost with it
            raise unknown(site, key, "the ledger of this thread was damaged")
    elif entry.state == DIVERGED:
        settled = yield from _settle_divergence(lctx, ctx, site, entry)
        if settled is not None:
            return settled
    else:
        key = entry.idempotency_key or key
        attempts = entry.attempts
        if entry.state == RESULT:
            yield replay_note(entry, "tool")
            return CallDecision(replay=True, value=entry.result, key=key, entry=entry)
        if entry.outcome_unknown:
            reason = unknown_reason(entry)
            answer = ctx.answers.get(site.field)
            if answer is None:
                # A record written back over a newer one (heads.py) may hide a call
                # that finished: a human decides, whatever the policy.
                if policy not in ("retry", "readonly") or entry.damage == REPLAYED:
                    raise unknown(site, key, reason)
            else:
                yield escalation_note("lgd.escalation.resolved", entry, answer.action)
                if answer.action == "fail":
                    raise unknown(site, key, f"{reason}; a human chose to fail it")
                if answer.action == "skip":
                    value = skipped_result(site, answer.result)
                    return (yield from _skip(lctx, ctx, site, entry, value))
            # retry (by policy or by a human): run again under the same key
    intent = LedgerEntry(
        field=site.field,
        **vars(site.where),
        state=INTENT,
        idempotency_key=key,
        tool_call_id=site.tool_call_id,
        args=site.args,
        attempts=attempts + 1,
        escalations=entry.escalations if entry is not None else (),
        decisions=entry.decisions if entry is not None else {},
        resolution=(ctx.answers[site.field].action if site.field in ctx.answers else None),
        started_at=time.time(),
        diverged_from=entry.diverged_from if entry is not None else None,
        hint=hint,
        **facts(ctx, entry),
    )
    # The answers this call was made from are settled by its intent (journal.py).
    taken, ctx.unsettled = ctx.unsettled, []
    settled = [replace(e, settled=True) for e in taken]
    try:
        yield from write(
            lctx,
            site.thread_id,
            [intent],
            replacing=[entry] if entry else [],
            settle=settled,
            read_as={site.field: entry},
        )
    except Changed:
        ctx.unsettled = [*taken, *ctx.unsettled]
        raise
    lctx.memory.settled(site.thread_id, settled)
    return CallDecision(replay=False, key=key, entry=intent)


def _settle_divergence(
    lctx: LedgerContext, ctx: TaskContext, site: Site, entry: LedgerEntry
) -> Plan[CallDecision | None]:
    """Apply a human's answer to a diverged call: ``skip`` records the standing
    result as the new call's, ``fail`` raises; None runs it (``retry``)."""
    recorded = ctx.recorded(entry.diverged_from or "")
    answer = ctx.answers.get(site.field)
    if answer is None:  # asked no more: the ledger was since told to run it
        if lctx.on_divergence == "new_call":
            return None
        raise diverged_error(site, recorded)
    if answer.action == "fail":
        raise diverged_error(site, recorded, "a human chose to fail it")
    if answer.action == "retry":
        return None
    if "result" in answer.model_fields_set or recorded is None:
        value = skipped_result(site, answer.result)
    else:
        value = standing_result(recorded, site)
    return (yield from _skip(lctx, ctx, site, entry, value))


def _skip(
    lctx: LedgerContext, ctx: TaskContext, site: Site, entry: LedgerEntry, value: Any
) -> Plan[CallDecision]:
    """Record ``value`` as the call's result without running it (a human's skip)."""
    done = replace(
        as_intent(entry, site.thread_id, **facts(ctx, entry)),
        state=RESULT,
        result=value,
        resolution="skip",
        finished_at=time.time(),
    )
    yield from write(lctx, site.thread_id, [done], replacing=[entry], read_as={site.field: entry})
    return CallDecision(replay=True, value=value, key=done.idempotency_key or site.key, entry=done)


def finish(
    lctx: LedgerContext, site: Site, decision: CallDecision, state: str, **fields: Any
) -> Plan[None]:
    entry = replace(
        cast(LedgerEntry, decision.entry),
        state=state,
        damage=None,
        finished_at=time.time(),
        **fields,
    )
    yield from write(lctx, site.thread_id, [entry])


def unknown(site: Site, key: str, reason: str) -> ToolOutcomeUnknownError:
    return ToolOutcomeUnknownError(
        thread_id=site.thread_id,
        tool_call_id=site.tool_call_id,
        name=site.name,
        idempotency_key=key,
        reason=reason,
    )


def recorded_run(
    lctx: LedgerContext, site: Site, decision: CallDecision, call: Callable[[], Any]
) -> CallSequence[Any]:
    """Run the call (``call()``, awaited in async code) under its idempotency key, then
    record its outcome: its result, its error, or that it interrupted (LangGraph runs it
    again on resume). Returns its result; its error is raised again."""
    token = current_key.set(decision.key)
    try:
        result = check_recordable((yield Invoke(call)))
    except GraphBubbleUp:  # the tool itself interrupted: LangGraph reruns it on resume
        yield finish(lctx, site, decision, INTERRUPTED)
        raise
    except Exception as exc:
        yield finish(lctx, site, decision, ERROR, error=describe_error(exc))
        raise
    finally:
        current_key.reset(token)
    yield finish(lctx, site, decision, RESULT, result=result)
    return result


def replaced(entry: LedgerEntry, message_calls: list[dict[str, Any]]) -> bool:
    """Whether the AI message now holds another call at ``entry``'s place."""
    return entry.position < FALLBACK_POSITION and call_at(message_calls, entry) is None


def fresh(exc: BaseException) -> BaseException:
    # Parallel calls re-raise one stopping interrupt; each gets its own exception object.
    if isinstance(exc, GraphInterrupt):
        return GraphInterrupt(*exc.args)
    return exc


def replay_note(entry: LedgerEntry, kind: str) -> Note:
    """The telemetry event of a call answered from the ledger instead of running again."""
    return Note(
        "lgd.replay",
        {
            "lgd.call.name": entry.name,
            "lgd.call.kind": kind,
            "lgd.idempotency_key": entry.idempotency_key or "",
        },
    )


def escalation_note(event: str, entry: LedgerEntry, action: str | None = None) -> Note:
    """The telemetry event of an escalation put to a human, or of its answer applied."""
    found = {"lgd.call.name": entry.name, "lgd.idempotency_key": entry.idempotency_key or ""}
    if action is not None:
        found["lgd.action"] = action
    elif entry.state == DAMAGED or entry.outcome_unknown:
        found["lgd.reason"] = unknown_reason(entry)
    return Note(event, found)
