"""The ledger's plans: the decision each call makes, its intent, result and escalations.

Owns the decision each call makes on each attempt (``_begin``): replay a recorded
result, run (recording its intent first), stop because its outcome is unknown and its
policy says so, or settle a call that diverged from the one recorded at its place
(``divergence.py``). Rules it keeps:
  * The intent is stored, synchronously, before the tool runs; the result after it. A
    call with an intent and no result has an unknown outcome: ``retry`` runs it again
    under the same idempotency key, ``escalate`` asks a human (``interrupt()``),
    ``fail`` raises ``ToolOutcomeUnknownError``.
  * A ledger that was ever damaged makes a call with no entry an unknown outcome too
    (its entry may be what was lost).
  * An intent settles the model answers its call was made from, in the same write
    (``journal.py``).
Reads and writes are ``store.py``'s; plans yield ``ops.Script`` operations, which the
ToolLedger drives through the saver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from langgraph.errors import GraphInterrupt

from langgraph_durable.core.errors import ToolOutcomeUnknownError
from langgraph_durable.core.heads import REPLAYED
from langgraph_durable.core.ops import Note, Plan
from langgraph_durable.ledger.divergence import (
    diverged_entry,
    diverged_error,
    recorded_at,
    skipped_result,
    standing_result,
    suspect_at,
)
from langgraph_durable.ledger.entries import (
    DAMAGED,
    DIVERGED,
    INTENT,
    RESULT,
    Divergence,
    LedgerEntry,
    Policy,
    next_slot,
    unknown_reason,
)
from langgraph_durable.ledger.executions import (
    Lineage,
)
from langgraph_durable.ledger.sites import (
    FALLBACK_POSITION,
    Site,
    TaskContext,
    call_at,
    call_site,
    canonical_args,
    facts,
    ordered_positions,
    site_idempotency_key,
)
from langgraph_durable.ledger.store import LedgerStore

logger = logging.getLogger("langgraph_durable")


@dataclass
class CallDecision:
    replay: bool
    value: Any = None
    key: str = ""
    entry: LedgerEntry | None = None


class LedgerPlans(LedgerStore):
    """The plans of ``ToolLedger`` (its settings: the saver, the policies)."""

    saver: Any
    on_divergence: Divergence
    policies: dict[str, Policy]
    default_policy: Policy
    use_tool_hints: bool

    def _policy_of(self, entry: LedgerEntry) -> Policy:
        """A recorded call's policy: ``policies=``, else its tool's hint when it was
        recorded (the tool object is not at hand for the other calls of a task)."""
        hint = cast("Policy | None", entry.hint if self.use_tool_hints else None)
        return self.policies.get(entry.name) or hint or self.default_policy

    def _prepare_parallel(
        self, ctx: TaskContext, message_calls: list[dict[str, Any]], lineage: Lineage
    ) -> Plan[list[tuple[int, LedgerEntry]]]:
        """Load a tool task's entries and number every question to ask a human: unknown
        outcomes whose policy escalates, and calls that diverged from the recorded ones.

        The calls of one ToolNode task run in parallel, but LangGraph matches resume
        answers to ``interrupt()`` calls by their order within the task. So escalations
        are numbered once, persisted before any is raised, and always raised in that
        order by one caller (``_ask``), on every replay of the task.
        """
        yield from self._load(ctx, lineage)
        thread_id = ctx.place.thread_id
        entries = ctx.entries
        ordered = [
            call_site(
                self._keys,
                ctx,
                message_calls[i]["name"],
                message_calls[i].get("args", {}),
                tool_call_id=message_calls[i].get("id"),
                position=i,
            )
            for i in ordered_positions(message_calls)
        ]
        diverged = []
        if self.on_divergence == "escalate":
            for other in ordered:
                if other.field in entries:
                    continue
                recorded = recorded_at(entries.values(), other)
                if recorded is None:
                    recorded = self._asked_about(ctx, other)
                if recorded is not None:
                    diverged.append(diverged_entry(other, recorded))
        # an unknown outcome whose place now holds another call is no question of its own
        replaced = {
            e.field for e in entries.values() if message_calls and _replaced(e, message_calls)
        }
        unknown = [
            e
            for e in entries.values()
            if e.outcome_unknown
            and not e.model_call  # a lost model answer is asked for again, never escalated
            and e.escalation is None
            and e.field not in replaced
            and self._policy_of(e) == "escalate"
        ]
        fresh = sorted([*unknown, *diverged], key=lambda e: (e.position, e.field))
        if fresh:
            first = next_slot(entries.values())
            fresh = [
                self._as_intent(
                    e,
                    thread_id,
                    escalation=first + i,
                    escalations=(*e.escalations, first + i),
                    call=call_at(message_calls, e),
                    **facts(ctx, e),
                )
                for i, e in enumerate(fresh)
            ]
            yield from self._write(thread_id, fresh, replacing=entries.values())
            entries.update({e.field: e for e in fresh})
            for asked in fresh:
                yield escalation_note("lgd.escalation.raised", asked)
        slots = {slot: e for e in entries.values() for slot in e.escalations}
        return sorted(slots.items())

    def _escalate_inline(
        self, ctx: TaskContext, site: Site, policy: Policy
    ) -> Plan[LedgerEntry | None]:
        """The entry of a sequential call, numbered and persisted if it must escalate now
        (its outcome is unknown, or it diverged); ``None`` if it never escalated."""
        entry = ctx.entries.get(site.field)
        recorded = None
        if entry is None and self.on_divergence == "escalate":
            recorded = recorded_at(ctx.entries.values(), site) or self._asked_about(
                ctx, site, policy
            )
        if recorded is not None or (
            entry is not None
            and entry.outcome_unknown
            and entry.escalation is None
            and policy == "escalate"
        ):
            asked = entry if recorded is None else diverged_entry(site, recorded)
            slot = next_slot(ctx.entries.values())
            numbered = self._as_intent(
                asked,
                site.thread_id,
                escalation=slot,
                escalations=(*asked.escalations, slot),
                **facts(ctx, asked),
            )
            yield from self._write(site.thread_id, [numbered], replacing=[entry] if entry else [])
            ctx.entries[site.field] = entry = numbered
            yield escalation_note("lgd.escalation.raised", numbered)
        return entry if entry is not None and entry.escalations else None

    def _asked_about(
        self, ctx: TaskContext, site: Site, policy: Policy | None = None
    ) -> LedgerEntry | None:
        """The call a question is put about (``divergence.suspect_at``), unless the tool
        retries under the recorded key (an idempotent API then answers for the same
        call) or fails (``_begin`` raises)."""
        suspect = suspect_at(ctx, site)
        if suspect is None:
            return None
        recorded = suspect[0]
        policy = policy or self._policy_of(recorded)
        same = recorded.args_hash == site.where.args_hash and recorded.idempotency_key
        if policy == "retry" and same:
            ctx.borrowed[site.field] = str(recorded.idempotency_key)
            return None
        return None if policy == "fail" else recorded

    def _as_intent(
        self,
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

    def _begin(
        self, ctx: TaskContext, site: Site, policy: Policy, hint: str | None = None
    ) -> Plan[CallDecision]:
        """Decide what a call does on this attempt; record its intent if it runs.
        ``hint``: the policy its tool's metadata gives, kept with the intent."""
        if ctx.failure is not None:
            raise _fresh(ctx.failure)
        entry = ctx.entries.get(site.field)
        key = site.key
        attempts = 0
        if entry is None:
            recorded = recorded_at(ctx.entries.values(), site)
            # "escalate" asked before the call began (a diverged entry): none reach here
            if recorded is not None and self.on_divergence != "new_call":
                raise diverged_error(site, recorded)
            suspect = suspect_at(ctx, site)
            if suspect is not None and self.on_divergence == "raise":
                raise diverged_error(site, suspect[0], suspect[1])
            if suspect is not None and self.on_divergence == "escalate" and policy == "fail":
                raise self._unknown(site, key, suspect[1])
            key = ctx.borrowed.get(site.field, key)
            if ctx.ledger_damaged:  # an entry of this task may have been lost with it
                raise self._unknown(site, key, "the ledger of this thread was damaged")
        elif entry.state == DIVERGED:
            settled = yield from self._settle_divergence(ctx, site, entry)
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
                        raise self._unknown(site, key, reason)
                else:
                    yield escalation_note("lgd.escalation.resolved", entry, answer.action)
                    if answer.action == "fail":
                        raise self._unknown(site, key, f"{reason}; a human chose to fail it")
                    if answer.action == "skip":
                        value = skipped_result(site, answer.result)
                        return (yield from self._skip(ctx, site, entry, value))
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
        settled, ctx.unsettled = [replace(e, settled=True) for e in ctx.unsettled], []
        yield from self._write(
            site.thread_id, [intent], replacing=[entry] if entry else [], settle=settled
        )
        self._settled(site.thread_id, settled)
        return CallDecision(replay=False, key=key, entry=intent)

    def _settled(self, thread_id: str, entries: list[LedgerEntry]) -> None:
        """Hook: ``entries`` (model answers) were just recorded as settled."""

    def _settle_divergence(
        self, ctx: TaskContext, site: Site, entry: LedgerEntry
    ) -> Plan[CallDecision | None]:
        """Apply a human's answer to a diverged call: ``skip`` records the standing
        result as the new call's, ``fail`` raises; None runs it (``retry``)."""
        recorded = ctx.recorded(entry.diverged_from or "")
        answer = ctx.answers.get(site.field)
        if answer is None:  # asked no more: the ledger was since told to run it
            if self.on_divergence == "new_call":
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
        return (yield from self._skip(ctx, site, entry, value))

    def _skip(
        self, ctx: TaskContext, site: Site, entry: LedgerEntry, value: Any
    ) -> Plan[CallDecision]:
        """Record ``value`` as the call's result without running it (a human's skip)."""
        done = replace(
            self._as_intent(entry, site.thread_id, **facts(ctx, entry)),
            state=RESULT,
            result=value,
            resolution="skip",
            finished_at=time.time(),
        )
        yield from self._write(site.thread_id, [done], replacing=[entry])
        return CallDecision(
            replay=True, value=value, key=done.idempotency_key or site.key, entry=done
        )

    def _finish(self, site: Site, decision: CallDecision, state: str, **fields: Any) -> Plan[None]:
        entry = replace(
            cast(LedgerEntry, decision.entry),
            state=state,
            damage=None,
            finished_at=time.time(),
            **fields,
        )
        yield from self._write(site.thread_id, [entry])

    def _unknown(self, site: Site, key: str, reason: str) -> ToolOutcomeUnknownError:
        return ToolOutcomeUnknownError(
            thread_id=site.thread_id,
            tool_call_id=site.tool_call_id,
            name=site.name,
            idempotency_key=key,
            reason=reason,
        )


def _replaced(entry: LedgerEntry, message_calls: list[dict[str, Any]]) -> bool:
    """Whether the AI message now holds another call at ``entry``'s place."""
    return entry.position < FALLBACK_POSITION and call_at(message_calls, entry) is None


def _fresh(exc: BaseException) -> BaseException:
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
