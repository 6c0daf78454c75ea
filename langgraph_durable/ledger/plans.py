"""The ledger's plans: read a task's entries, record an intent, a result, an escalation.

Owns the ledger's Redis conversation (``ledger_read.lua``, ``ledger_write.lua``) and the
decision each call makes on each attempt (``_begin``): replay a recorded result, run
(recording its intent first), stop because its outcome is unknown and its policy
says so, or settle a call that diverged from the one recorded at its place
(``divergence.py``). Rules it keeps:
  * The intent is stored, synchronously, before the tool runs; the result after it. A
    call with an intent and no result has an unknown outcome: ``retry`` runs it again
    under the same idempotency key, ``escalate`` asks a human (``interrupt()``),
    ``fail`` raises ``ToolOutcomeUnknownError``.
  * Every write carries this context's fencing token, like checkpoint writes.
  * A damaged record that is replaced goes to the quarantine first; a ledger that was
    ever damaged makes a call with no entry an unknown outcome too (its entry may be
    what was lost).
Plans yield ``ops.Script`` operations; the ToolLedger drives them through the saver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from langgraph.errors import GraphInterrupt

from langgraph_durable.errors import ToolOutcomeUnknownError
from langgraph_durable.fencing import held_token
from langgraph_durable.keys import KeySchema
from langgraph_durable.ledger.divergence import (
    diverged_entry,
    diverged_error,
    recorded_at,
    skipped_result,
    standing_result,
)
from langgraph_durable.ledger.entries import (
    _LEDGER,
    DAMAGED,
    DIVERGED,
    INTENT,
    RESULT,
    Divergence,
    LedgerEntry,
    Policy,
    _next_slot,
    _unknown_reason,
    open_entry,
    seal_entry,
)
from langgraph_durable.ledger.executions import (
    Lineage,
    choose,
    created_at,
    executions,
    new_name,
)
from langgraph_durable.ledger.rollback import voided_runs
from langgraph_durable.ledger.sites import (
    _FALLBACK_POSITION,
    _call_at,
    _canonical_args,
    _idempotency_key,
    _Site,
    _TaskContext,
    call_site,
    facts,
    ordered_positions,
)
from langgraph_durable.ops import Plan, Script

logger = logging.getLogger("langgraph_durable")


@dataclass
class _Read:
    """What one ledger read found (``LedgerPlans._read``)."""

    entries: list[LedgerEntry]
    damaged: bool  # a ledger key was ever moved aside: entries may be missing
    unindexed: list[bytes]
    saved: set[str]  # starting checkpoints of the place's executions still saved
    voided: set[str]  # runs rolled back
    newest: list[str]  # the ids of the two newest checkpoints of the task's namespace


@dataclass
class _Decision:
    replay: bool
    value: Any = None
    key: str = ""
    entry: LedgerEntry | None = None


class LedgerPlans:
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

    @property
    def _keys(self) -> KeySchema:
        return self.saver.core.keys  # type: ignore[no-any-return]

    def _read(
        self, thread_id: str, bounds: tuple[str, str], prefix: str = "", start_member: str = ""
    ) -> Plan[_Read]:
        """Entries within ``bounds`` (whose fields start with ``prefix``), also those whose
        index member was lost; whether the ledger was ever damaged; the fields of those
        the index lost (``_load`` re-indexes them). With ``start_member`` (one task's
        read), also which executions' starting checkpoints are saved, and the runs rolled
        back (executions.py)."""
        tk = self._keys.thread(thread_id)
        void_min, void_max = self._keys.ledger_void_range()
        wrongtype, damaged, flat, unindexed, saved, voids, newest = yield Script(
            "ledger_read", tk.with_twins(), [*bounds, "", prefix, start_member, void_min, void_max]
        )
        if wrongtype:
            logger.error(
                "langgraph-durable: ledger keys of thread %r hold the wrong type: %s",
                thread_id,
                [k.decode() if isinstance(k, bytes) else k for k in wrongtype],
            )
        entries = []
        for i in range(0, len(flat), 2):
            if self._keys.ledger_void_run(flat[i]) is not None:
                voids += flat[i : i + 2]  # a whole-ledger read holds them among the entries
                continue
            try:
                entries.append(open_entry(self.saver.core, thread_id, flat[i], flat[i + 1] or None))
            except (ValueError, UnicodeDecodeError):  # not a field we wrote
                logger.error("langgraph-durable: malformed ledger field %r", flat[i])
        if unindexed:
            logger.error(
                "langgraph-durable: the ledger index of thread %r lost %d entries whose "
                "records are still there (eviction, a bad restore?): read from the records",
                thread_id,
                len(unindexed),
            )
            entries.sort(key=lambda e: e.field)  # in index order, as if nothing was lost
        voided = voided_runs(self.saver.core, thread_id, voids)
        if voided:
            entries = [replace(e, rolled_back=e.run_id in voided) for e in entries]
        newest_ids = []
        for member in newest:
            try:
                newest_ids.append(self._keys.parse_checkpoint_member(member)[1])
            except (ValueError, UnicodeDecodeError):
                continue  # a damaged index member: no time to read from it
        saved_starts = {_text(s) for s in saved}
        return _Read(entries, bool(damaged), list(unindexed), saved_starts, voided, newest_ids)

    def _write(
        self,
        thread_id: str,
        entries: Iterable[LedgerEntry],
        replacing: Iterable[LedgerEntry] = (),
    ) -> Plan[None]:
        """Store entries; the bytes of any damaged record they replace go to quarantine."""
        tk = self._keys.thread(thread_id)
        damaged = {e.field: e.damage for e in replacing if e.state == DAMAGED}
        args: list[Any] = [self.saver.core.ttl_arg, held_token(self._keys.prefix, thread_id)]
        run_ids: set[str] = set()
        for entry in entries:
            if entry.run_id:
                run_ids.add(entry.run_id)
            reason = damaged.get(entry.field) or ""
            args += [
                entry.field,
                seal_entry(self.saver.core, thread_id, entry),
                self._keys.quarantine_field(_LEDGER, entry.field) if reason else "",
                reason,
            ]
        core = self.saver.core
        # A run that recorded calls is in the run index, so a rollback finds the thread
        # even if the run saved no checkpoint there (rollback.py).
        ahead = tuple(c for r in sorted(run_ids) for c in core.run_index.ahead(r, thread_id))
        _, acked = yield from core.write_round_trip(
            [Script("ledger_write", tk.with_twins(), args)], raising=True, ahead=ahead
        )
        core.replicated(tk, acked)

    def _load(self, ctx: _TaskContext, lineage: Lineage) -> Plan[None]:
        """Read the task's entries (one round trip), decide which execution the task
        attempt belongs to (executions.py) and keep that execution's entries."""
        place = ctx.place
        read = yield from self._read(
            place.thread_id,
            self._keys.ledger_task_range(place.prefix),
            place.prefix,
            place.start_member,
        )
        if read.unindexed:  # put the index back together (an empty record re-indexes a field)
            token = held_token(self._keys.prefix, place.thread_id)
            args: list[Any] = [self.saver.core.ttl_arg, token]
            args += [x for field in read.unindexed for x in (field, "", "", "")]
            yield Script("ledger_write", self._keys.thread(place.thread_id).with_twins(), args)
        found = executions(read.entries, read.voided)
        others = [cid for cid in read.newest if cid != place.now.start]
        saved_since = created_at(others[0]) if others else None
        chosen = choose(found, place.now, read.saved, lineage, saved_since)
        ctx.execution = chosen.name if chosen is not None else new_name(found, place.now)
        ctx.entries = {e.field: e for e in read.entries if e.execution == ctx.execution}
        ctx.ledger_damaged = read.damaged
        for e in ctx.entries.values():
            if e.damage:
                logger.error(
                    "langgraph-durable: ledger entry %r of thread %r is damaged (%s); its "
                    "outcome is treated as unknown",
                    e.field,
                    place.thread_id,
                    e.damage,
                )

    def _prepare_parallel(
        self, ctx: _TaskContext, message_calls: list[dict[str, Any]], lineage: Lineage
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
                recorded = None if other.field in entries else recorded_at(entries.values(), other)
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
            first = _next_slot(entries.values())
            fresh = [
                self._as_intent(
                    e,
                    thread_id,
                    escalation=first + i,
                    escalations=(*e.escalations, first + i),
                    call=_call_at(message_calls, e),
                    **facts(ctx, e),
                )
                for i, e in enumerate(fresh)
            ]
            yield from self._write(thread_id, fresh, replacing=entries.values())
            entries.update({e.field: e for e in fresh})
        slots = {slot: e for e in entries.values() for slot in e.escalations}
        return sorted(slots.items())

    def _escalate_inline(
        self, ctx: _TaskContext, site: _Site, policy: Policy
    ) -> Plan[LedgerEntry | None]:
        """The entry of a sequential call, numbered and persisted if it must escalate now
        (its outcome is unknown, or it diverged); ``None`` if it never escalated."""
        entry = ctx.entries.get(site.field)
        recorded = None
        if entry is None and self.on_divergence == "escalate":
            recorded = recorded_at(ctx.entries.values(), site)
        if recorded is not None or (
            entry is not None
            and entry.outcome_unknown
            and entry.escalation is None
            and policy == "escalate"
        ):
            asked = entry if recorded is None else diverged_entry(site, recorded)
            slot = _next_slot(ctx.entries.values())
            numbered = self._as_intent(
                asked,
                site.thread_id,
                escalation=slot,
                escalations=(*asked.escalations, slot),
                **facts(ctx, asked),
            )
            yield from self._write(site.thread_id, [numbered], replacing=[entry] if entry else [])
            ctx.entries[site.field] = entry = numbered
        return entry if entry is not None and entry.escalations else None

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
                idempotency_key=_idempotency_key(thread_id, entry.field),
                tool_call_id=call.get("id") if call else None,
                args=_canonical_args(call.get("args", {}))[0] if call else None,
                **changes,
            )
        return replace(entry, **changes)

    def _begin(
        self, ctx: _TaskContext, site: _Site, policy: Policy, hint: str | None = None
    ) -> Plan[_Decision]:
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
                return _Decision(replay=True, value=entry.result, key=key, entry=entry)
            if entry.outcome_unknown:
                reason = _unknown_reason(entry)
                answer = ctx.answers.get(site.field)
                if answer is None:
                    if policy not in ("retry", "readonly"):
                        raise self._unknown(site, key, reason)
                else:
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
            site.thread_id, [intent, *settled], replacing=[entry] if entry else []
        )
        self._settled(site.thread_id, settled)
        return _Decision(replay=False, key=key, entry=intent)

    def _settled(self, thread_id: str, entries: list[LedgerEntry]) -> None:
        """Hook: ``entries`` (model answers) were just recorded as settled."""

    def _settle_divergence(
        self, ctx: _TaskContext, site: _Site, entry: LedgerEntry
    ) -> Plan[_Decision | None]:
        """Apply a human's answer to a diverged call: ``skip`` records the standing
        result as the new call's, ``fail`` raises; None runs it (``retry``)."""
        recorded = ctx.entries.get(entry.diverged_from or "")
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
        self, ctx: _TaskContext, site: _Site, entry: LedgerEntry, value: Any
    ) -> Plan[_Decision]:
        """Record ``value`` as the call's result without running it (a human's skip)."""
        done = replace(
            self._as_intent(entry, site.thread_id, **facts(ctx, entry)),
            state=RESULT,
            result=value,
            resolution="skip",
            finished_at=time.time(),
        )
        yield from self._write(site.thread_id, [done], replacing=[entry])
        return _Decision(replay=True, value=value, key=done.idempotency_key or site.key, entry=done)

    def _finish(self, site: _Site, decision: _Decision, state: str, **fields: Any) -> Plan[None]:
        entry = replace(
            cast(LedgerEntry, decision.entry),
            state=state,
            damage=None,
            finished_at=time.time(),
            **fields,
        )
        yield from self._write(site.thread_id, [entry])

    def _unknown(self, site: _Site, key: str, reason: str) -> ToolOutcomeUnknownError:
        return ToolOutcomeUnknownError(
            thread_id=site.thread_id,
            tool_call_id=site.tool_call_id,
            name=site.name,
            idempotency_key=key,
            reason=reason,
        )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _replaced(entry: LedgerEntry, message_calls: list[dict[str, Any]]) -> bool:
    """Whether the AI message now holds another call at ``entry``'s place."""
    return entry.position < _FALLBACK_POSITION and _call_at(message_calls, entry) is None


def _fresh(exc: BaseException) -> BaseException:
    # Parallel calls re-raise one stopping interrupt; each gets its own exception object.
    if isinstance(exc, GraphInterrupt):
        return GraphInterrupt(*exc.args)
    return exc
