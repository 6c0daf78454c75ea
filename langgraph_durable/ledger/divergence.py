"""Divergence: a replayed call that differs from the call recorded at its place.

A model that ran again (its checkpoint was lost, or a node calls it before a durable
call) rarely asks for the same arguments twice. Owns what the ledger knows about such a
call: which recorded call it replaces, the question put to a human (``interrupt()``
value and answer schema, shared with unknown outcomes so there is one escalation
mechanism), the error it raises, and what a ``skip`` answer hands back. Rules:
  * The new call is stored as a ``diverged`` entry (never run) holding its escalation
    number and the field of the recorded call; the answer turns it into a ``result``
    (skip) or an ``intent`` (retry), so a second replay replays it and asks nothing.
  * ``skip`` means the recorded effect stands: the new call returns the answer's
    ``result``, else the recorded result re-addressed to the new ``tool_call_id``.
  * A recorded call whose outcome is unknown is not asked about separately: the
    divergence question covers it (the model no longer asks for it).
Pure functions; ``calls.py`` and ``escalations.py`` do the Redis side.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from langgraph_durable.core.errors import DIVERGED_ADVICE, ToolCallDivergedError
from langgraph_durable.ledger.decide import Answer, decide
from langgraph_durable.ledger.entries import (
    DIVERGED,
    RESULT,
    DivergenceAnswer,
    EscalationAnswer,
    LedgerEntry,
    escalation_value,
    unknown_reason,
)
from langgraph_durable.ledger.sites import Site, TaskContext


def recorded_at(entries: Iterable[LedgerEntry], site: Site) -> LedgerEntry | None:
    """The call recorded at ``site``'s place that is not ``site``'s call: the newest that
    ran (a ``diverged`` entry never did); None if there is none or the call is unordered."""
    if not site.ordered:
        return None
    others = [
        e
        for e in entries
        if e.position == site.position and e.field != site.field and e.state != DIVERGED
    ]
    return max(others, key=lambda e: (e.started_at or 0.0, e.field), default=None)


def suspect_at(ctx: TaskContext, site: Site) -> tuple[LedgerEntry, str] | None:
    """The call another execution recorded at ``site``'s place, and why, when the
    ledger cannot tell whether this call continues it (decide.py: ASK)."""
    # Of several at the place (siblings of a fan-out, both unsure after a crash),
    # the one that asked for the same call is the one to ask about.
    alike = [
        e
        for e in ctx.suspects.values()
        if (e.name, e.args_hash) == (site.name, site.where.args_hash)
    ]
    recorded = recorded_at(alike, site) or recorded_at(ctx.suspects.values(), site)
    if recorded is None:
        return None
    facts = ctx.facts.get(recorded.execution)
    if facts is None:
        return None
    same = recorded.name == site.name and recorded.args_hash == site.where.args_hash
    verdict = decide(replace(facts, same_request=same))
    if verdict.answer is not Answer.ASK:
        return None
    why = f"the ledger cannot tell whether this run continues it ({verdict.why})"
    return recorded, f"{why}; {DIVERGED_ADVICE}"


def diverged_entry(site: Site, recorded: LedgerEntry, hint: str | None = None) -> LedgerEntry:
    """The entry of a new call that differs from ``recorded``: waiting for an answer."""
    return LedgerEntry(
        field=site.field,
        **vars(site.where),
        state=DIVERGED,
        idempotency_key=site.key,
        tool_call_id=site.tool_call_id,
        args=site.args,
        diverged_from=recorded.field,
        hint=hint,
        started_at=time.time(),
    )


def question(
    thread_id: str, slot: int, entry: LedgerEntry, entries: Mapping[str, LedgerEntry]
) -> tuple[dict[str, Any], type[EscalationAnswer | DivergenceAnswer]]:
    """The ``interrupt()`` value and answer schema of escalation ``slot`` of ``entry``.

    An entry's first escalation is its divergence question if it diverged; any later
    one (a retried new call whose outcome was lost again) is an unknown outcome. The
    same slot always gets the same schema, so LangGraph's stored answer validates on
    every replay."""
    if entry.diverged_from is None or slot != entry.escalations[0]:
        return escalation_value(thread_id, entry), EscalationAnswer
    recorded = entries.get(entry.diverged_from)
    value = {
        "type": "tool_call_diverged",
        "thread_id": thread_id,
        "checkpoint_ns": entry.checkpoint_ns,
        "step": entry.step,
        "position": entry.position,
        "recorded": _recorded_call(recorded),
        "call": {
            "tool_call_id": entry.tool_call_id,
            "name": entry.name,
            "args": entry.args,
            "idempotency_key": entry.idempotency_key,
        },
        "answers": ["skip", "retry", "fail"],
    }
    has_result = recorded is not None and recorded.state == RESULT
    return value, DivergenceAnswer if has_result else EscalationAnswer


def _recorded_call(recorded: LedgerEntry | None) -> dict[str, Any]:
    if recorded is None:  # dropped since (retention): nothing is known of it
        return {"outcome": "unknown", "reason": "its ledger entry is gone"}
    shown: dict[str, Any] = {
        "tool_call_id": recorded.tool_call_id,
        "name": recorded.name,
        "args": recorded.args,
        "idempotency_key": recorded.idempotency_key,
        "outcome": recorded.state,
    }
    if recorded.state == RESULT:
        result = recorded.result
        shown["result"] = result.content if isinstance(result, ToolMessage) else result
    elif recorded.outcome_unknown:
        shown.update(outcome="unknown", reason=unknown_reason(recorded))
    elif recorded.error:
        shown["error"] = recorded.error
    return shown


def diverged_error(
    site: Site, recorded: LedgerEntry | None, reason: str | None = None
) -> ToolCallDivergedError:
    return ToolCallDivergedError(
        thread_id=site.thread_id,
        position=site.position,
        recorded_name=recorded.name if recorded else "<unknown>",
        recorded_args=recorded.args if recorded else None,
        requested_name=site.name,
        requested_args=site.args,
        reason=reason,
    )


def standing_result(recorded: LedgerEntry, site: Site) -> Any:
    """The recorded call's result, as the new call's: a ToolMessage (also one inside a
    Command's update) answers the new ``tool_call_id``, so the conversation stays valid."""

    def readdressed(message: Any) -> Any:
        if isinstance(message, ToolMessage) and message.tool_call_id == recorded.tool_call_id:
            return message.model_copy(update={"tool_call_id": site.tool_call_id})
        return message

    result = recorded.result
    if site.tool_call_id is None:  # a durable call inside a node: the value itself
        return result
    if isinstance(result, ToolMessage):
        return readdressed(result)
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages")
        if isinstance(messages, list):
            update = {**result.update, "messages": [readdressed(m) for m in messages]}
            return dataclasses.replace(result, update=update)
    return result


def skipped_result(site: Site, result: Any) -> Any:
    """What a human's ``skip`` answer hands back: the ToolMessage the tool would have
    returned (a ToolMessage or Command answer is taken as is)."""
    if isinstance(result, (ToolMessage, Command)):
        return result
    if site.tool_call_id is None:  # a durable call inside a node returns the value itself
        return result
    from langgraph.prebuilt.tool_node import msg_content_output

    return ToolMessage(
        content=msg_content_output(result), name=site.name, tool_call_id=site.tool_call_id
    )
