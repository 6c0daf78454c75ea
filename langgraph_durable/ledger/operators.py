"""Operators' decisions: the calls waiting for a human, answering one outside a graph, and
dropping a recorded answer.

Owns ``escalations`` (every call waiting for an answer, across threads: thread, tool,
arguments, idempotency key, age; and the calls of rolled-back runs whose effect may have
happened), ``resolve`` (an operator's answer recorded on the call's ledger entry with
who, when and why) and ``drop`` (a recorded model answer, or an entry of a rolled-back
run, set aside with who, when and why). Rules it keeps:
  * A call waits when its current escalation was raised and neither LangGraph nor an
    operator has answered it. It is named by its idempotency key, as listed.
  * An answer is checked as ``Command(resume=...)`` would check it (``skip`` needs the
    tool's output, unless a divergence's recorded call has one) before it is stored.
  * The next replay applies it without raising that escalation's ``interrupt()``, on
    every later replay too (``escalations.ask``): LangGraph matches its stored answers to
    interrupts by order, and a slot that never raises keeps that order. Answer a call one
    way: ``resolve`` before the thread runs again, or ``Command(resume=...)``, not both.
  * A write carries no fencing token: while a worker holds the thread's lease the
    decision is refused (``LeaseHeldError``), never written under a running task.
  * ``drop`` takes a model answer (the journal asks the model again at its place) or an
    entry of a rolled-back run (it leaves ``escalations``); a tool call of a live run is
    answered with ``resolve``, never dropped. The entry keeps its result and every drop
    (who, why, when), also once a new answer is recorded over it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from langgraph_durable.core import inputs
from langgraph_durable.core.errors import InvalidConfigError
from langgraph_durable.core.ops import Plan
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.divergence import question
from langgraph_durable.ledger.entries import (
    DIVERGED,
    DROPPED,
    INTENT,
    RESULT,
    Decision,
    LedgerEntry,
)
from langgraph_durable.ledger.store import read, write

ACTIONS = ("retry", "skip", "fail")


@dataclass(frozen=True)
class Escalation:
    """A call waiting for a human's answer."""

    thread_id: str
    name: str
    args: Any
    idempotency_key: str | None
    kind: str  # "tool_outcome_unknown" | "tool_call_diverged" | "rolled_back"
    age_seconds: float | None  # since the call started
    entry: LedgerEntry


def waiting(entry: LedgerEntry) -> bool:
    """Whether ``entry``'s current escalation waits for an answer."""
    return (
        not entry.rolled_back
        and entry.escalation is not None
        and entry.state in (INTENT, DIVERGED)
        and entry.escalation not in entry.decisions
    )


def rolled_back_unknown(entry: LedgerEntry) -> bool:
    """Whether ``entry`` is a tool call of a rolled-back run that may have taken effect."""
    return entry.rolled_back and not entry.model_call and entry.outcome_unknown


def _kind(entry: LedgerEntry) -> str:
    if entry.rolled_back:
        return "rolled_back"
    return "tool_call_diverged" if entry.state == DIVERGED else "tool_outcome_unknown"


def escalations(lctx: LedgerContext, thread_ids: Sequence[str] | None) -> Plan[list[Escalation]]:
    """Every call waiting for an answer (and every call of a rolled-back run whose
    outcome is unknown) in ``thread_ids``, or in every thread of the key prefix."""
    if thread_ids is None:
        thread_ids = yield from lctx.core.all_thread_ids()
    now = time.time()
    found = []
    for thread_id in thread_ids:
        entries = (yield from read(lctx, str(thread_id), ("-", "+"))).entries
        for entry in entries:
            if waiting(entry) or rolled_back_unknown(entry):
                found.append(
                    Escalation(
                        thread_id=str(thread_id),
                        name=entry.name,
                        args=entry.args,
                        idempotency_key=entry.idempotency_key,
                        kind=_kind(entry),
                        age_seconds=now - entry.started_at if entry.started_at else None,
                        entry=entry,
                    )
                )
    return found


def resolve(
    lctx: LedgerContext,
    thread_id: str,
    idempotency_key: str,
    action: str,
    result: Any = None,
    reason: str | None = None,
    by: str | None = None,
) -> Plan[LedgerEntry]:
    if action not in ACTIONS:
        raise InvalidConfigError(f"action must be one of {ACTIONS}, got {action!r}")
    entries = (yield from read(lctx, thread_id, ("-", "+"))).entries
    matches = [e for e in entries if e.idempotency_key == idempotency_key and waiting(e)]
    if not matches:
        raise InvalidConfigError(
            f"thread {thread_id!r} has no call waiting for an answer with idempotency "
            f"key {idempotency_key!r} (`langgraph-durable escalations` lists them)"
        )
    entry = matches[0]
    slot = entry.escalation
    assert slot is not None  # waiting() says so
    _, schema = question(thread_id, slot, entry, {e.field: e for e in entries})
    decision = Decision(action, result if action == "skip" else None, reason, by, time.time())
    try:
        schema.model_validate(decision.answer())
    except ValidationError as exc:
        first = exc.errors()[0].get("msg", str(exc))
        raise InvalidConfigError(f"cannot {action} call {idempotency_key!r}: {first}") from None
    decided = replace(entry, decisions={**entry.decisions, slot: decision})
    yield from write(lctx, thread_id, [decided], replacing=[entry])
    return decided


def drop(
    lctx: LedgerContext, thread_id: str, idempotency_key: str, reason: str, by: str | None
) -> Plan[LedgerEntry]:
    if not inputs.text(reason, "reason").strip():
        raise InvalidConfigError("dropping a recorded entry needs a reason")
    if by is not None:
        inputs.text(by, "by")
    entries = (yield from read(lctx, thread_id, ("-", "+"))).entries
    matches = [e for e in entries if e.idempotency_key == idempotency_key]
    if not matches:
        raise InvalidConfigError(
            f"thread {thread_id!r} has no ledger entry with idempotency key "
            f"{idempotency_key!r} (`langgraph-durable ledger THREAD` lists them)"
        )
    entry = matches[0]
    if entry.state == DROPPED:
        raise InvalidConfigError(f"entry {idempotency_key!r} is dropped already")
    if not (entry.rolled_back or (entry.model_call and entry.state == RESULT)):
        raise InvalidConfigError(
            f"entry {idempotency_key!r} is a tool call of a run that was not rolled "
            "back: answer it with resolve, a recorded tool call is never dropped"
        )
    what = "answer" if entry.model_call else entry.state
    dropped = replace(
        entry,
        state=DROPPED,
        drops=(*entry.drops, (by, reason, time.time(), what)),
    )
    yield from write(lctx, thread_id, [dropped], replacing=[entry])
    return dropped
