"""The questions a task asks a human: which, numbered how, raised when.

Owns the escalations of a task attempt: unknown outcomes whose policy escalates, and
calls the ledger cannot prove to be the same as, or other than, a recorded one
(``divergence.py``: a call that diverged at its place, or one beside an execution
``decide.py`` is unsure about). Rules it keeps:
  * LangGraph matches resume answers to ``interrupt()`` calls by their order within
    the task, so every question gets a number once, persisted before any is raised,
    and the questions are raised in that order by one caller, on every replay.
  * The calls of a ToolNode task are numbered together (``prepare_parallel``), under
    the task's lock; a node's durable calls each at its own place (``escalate_inline``),
    in order with the node's own ``interrupt()`` calls.
  * A question an operator answered (``resolve``) is never raised again.
"""

from __future__ import annotations

from typing import Any

from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt
from pydantic import ValidationError

from langgraph_durable.core.errors import ToolOutcomeUnknownError
from langgraph_durable.core.ops import Plan
from langgraph_durable.ledger.calls import as_intent, escalation_note, replaced, unknown
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.divergence import diverged_entry, question, recorded_at, suspect_at
from langgraph_durable.ledger.entries import LedgerEntry, Policy, next_slot
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.sites import (
    Site,
    TaskContext,
    call_at,
    call_site,
    facts,
    ordered_positions,
)
from langgraph_durable.ledger.store import Changed, load, write


def prepare_parallel(
    lctx: LedgerContext, ctx: TaskContext, message_calls: list[dict[str, Any]], lineage: Lineage
) -> Plan[list[tuple[int, LedgerEntry]]]:
    """Load a tool task's entries and number every question to ask a human: unknown
    outcomes whose policy escalates, and calls that diverged from the recorded ones.

    The calls of one ToolNode task run in parallel, but LangGraph matches resume
    answers to ``interrupt()`` calls by their order within the task. So escalations
    are numbered once, persisted before any is raised, and always raised in that
    order by one caller (``ask``), on every replay of the task.

    The questions are written only if every record they replace is still the one
    read (``store.Changed``): else the task is read again and its questions numbered
    anew (a question about a call recorded since would ask a human to decide a done
    call's fate). Refused three times, the call's outcome is unknown.
    """
    refused = None
    for _ in range(3):
        yield from load(lctx, ctx, lineage)
        try:
            return (yield from _number(lctx, ctx, message_calls))
        except Changed as exc:
            refused = ctx.entries.get(exc.field)
    raise ToolOutcomeUnknownError(
        thread_id=ctx.place.thread_id,
        tool_call_id=refused.tool_call_id if refused else None,
        name=refused.name if refused else "?",
        idempotency_key=(refused.idempotency_key if refused else None) or "",
        reason="its ledger record changed three times while this worker decided",
    )


def _number(
    lctx: LedgerContext, ctx: TaskContext, message_calls: list[dict[str, Any]]
) -> Plan[list[tuple[int, LedgerEntry]]]:
    """Number and persist the questions of a loaded tool task (``prepare_parallel``)."""
    thread_id = ctx.place.thread_id
    entries = ctx.entries
    ordered = [
        call_site(
            lctx.keys,
            ctx,
            message_calls[i]["name"],
            message_calls[i].get("args", {}),
            tool_call_id=message_calls[i].get("id"),
            position=i,
        )
        for i in ordered_positions(message_calls)
    ]
    diverged = []
    if lctx.on_divergence == "escalate":
        for other in ordered:
            if other.field in entries:
                continue
            recorded = recorded_at(entries.values(), other)
            if recorded is None:
                recorded = asked_about(lctx, ctx, other)
            if recorded is not None:
                diverged.append(diverged_entry(other, recorded))
    # an unknown outcome whose place now holds another call is no question of its own
    elsewhere = {e.field for e in entries.values() if message_calls and replaced(e, message_calls)}
    unknown = [
        e
        for e in entries.values()
        if e.outcome_unknown
        and not e.model_call  # a lost model answer is asked for again, never escalated
        and e.escalation is None
        and e.field not in elsewhere
        and lctx.policy_of(e) == "escalate"
    ]
    fresh = sorted([*unknown, *diverged], key=lambda e: (e.position, e.field))
    if fresh:
        first = next_slot(entries.values())
        fresh = [
            as_intent(
                e,
                thread_id,
                escalation=first + i,
                escalations=(*e.escalations, first + i),
                call=call_at(message_calls, e),
                **facts(ctx, e),
            )
            for i, e in enumerate(fresh)
        ]
        read_as = {e.field: entries.get(e.field) for e in fresh}
        yield from write(lctx, thread_id, fresh, replacing=entries.values(), read_as=read_as)
        entries.update({e.field: e for e in fresh})
        for asked in fresh:
            yield escalation_note("lgd.escalation.raised", asked)
    slots = {slot: e for e in entries.values() for slot in e.escalations}
    return sorted(slots.items())


def escalate_inline(
    lctx: LedgerContext, ctx: TaskContext, site: Site, policy: Policy
) -> Plan[LedgerEntry | None]:
    """The entry of a sequential call, numbered and persisted if it must escalate now
    (its outcome is unknown, or it diverged); ``None`` if it never escalated. Its
    question is written only if the call's record is still the one read: else the
    task is read again once (as ``prepare_parallel``)."""
    for _ in range(2):
        try:
            return (yield from _escalate_once(lctx, ctx, site, policy))
        except Changed:
            yield from load(lctx, ctx, ctx.lineage)
    raise unknown(site, site.key, "its ledger record changed twice while this worker decided")


def _escalate_once(
    lctx: LedgerContext, ctx: TaskContext, site: Site, policy: Policy
) -> Plan[LedgerEntry | None]:
    entry = ctx.entries.get(site.field)
    recorded = None
    if entry is None and lctx.on_divergence == "escalate":
        recorded = recorded_at(ctx.entries.values(), site) or asked_about(lctx, ctx, site, policy)
    if recorded is not None or (
        entry is not None
        and entry.outcome_unknown
        and entry.escalation is None
        and policy == "escalate"
    ):
        asked = entry if recorded is None else diverged_entry(site, recorded)
        slot = next_slot(ctx.entries.values())
        numbered = as_intent(
            asked,
            site.thread_id,
            escalation=slot,
            escalations=(*asked.escalations, slot),
            **facts(ctx, asked),
        )
        yield from write(
            lctx,
            site.thread_id,
            [numbered],
            replacing=[entry] if entry else [],
            read_as={site.field: entry},
        )
        ctx.entries[site.field] = entry = numbered
        yield escalation_note("lgd.escalation.raised", numbered)
    return entry if entry is not None and entry.escalations else None


def asked_about(
    lctx: LedgerContext, ctx: TaskContext, site: Site, policy: Policy | None = None
) -> LedgerEntry | None:
    """The call a question is put about (``divergence.suspect_at``), unless the tool
    retries under the recorded key (an idempotent API then answers for the same
    call) or fails (``begin`` raises)."""
    suspect = suspect_at(ctx, site)
    if suspect is None:
        return None
    recorded = suspect[0]
    policy = policy or lctx.policy_of(recorded)
    same = recorded.args_hash == site.where.args_hash and recorded.idempotency_key
    if policy == "retry" and same:
        ctx.borrowed[site.field] = str(recorded.idempotency_key)
        return None
    return None if policy == "fail" else recorded


def ask(ctx: TaskContext, escalations: list[tuple[int, LedgerEntry]]) -> None:
    """Raise every escalation's ``interrupt()`` in its number's order; keep the answers
    that apply to current attempts, or the interrupt (or invalid answer) that stops
    the task, for every call."""
    for slot, entry in escalations:
        value, schema = question(ctx.place.thread_id, slot, entry, {**ctx.suspects, **ctx.entries})
        decided = entry.decisions.get(slot)
        if decided is not None:
            # An operator answered it (resolve): its interrupt() is never raised, on
            # any replay, so LangGraph's answers to the others keep their order.
            if slot == entry.escalation:
                ctx.answers[entry.field] = schema.model_validate(decided.answer())
            continue
        try:
            answer = interrupt(value, response_schema=schema)
        except (GraphInterrupt, ValidationError) as exc:  # an invalid answer can be
            ctx.failure = exc  # answered again: LangGraph stores nothing for it
            return
        if slot == entry.escalation:
            ctx.answers[entry.field] = answer
