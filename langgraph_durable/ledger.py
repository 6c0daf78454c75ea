"""The tool-result ledger: a resumed graph never calls a side-effecting tool twice.

For every call it records the *intent* before the tool runs and the *result* (or the
error raised) after, both synchronously, in the thread's own keys and under the same
integrity envelope as checkpoints. When LangGraph replays a task after a crash, a call
whose result is recorded gets that result back without running. A call with an intent
and no result (the process died during it, or its record is damaged) has an unknown
outcome, and the tool's policy decides: ``retry`` (same idempotency key), ``escalate``
(LangGraph ``interrupt()``, answered by a human) or ``fail``.

Where a call is recorded (its ledger field, see ``keys.py``):
    checkpoint namespace (without the running task's id), superstep, task (node and
    path), the call's position (its index in the AI message, or its order in a node),
    the tool name and a hash of the canonical arguments.
The superstep and task path are stable when a task is replayed, also when
``durability="async"`` lost the checkpoint the task started from; the provider's
``tool_call_id`` is not part of it (providers reuse ids such as ``call_0``).

The plans here are generators of ``core.Script`` operations, driven by the saver's sync
or async shell, so each Redis interaction exists once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, cast

import msgpack
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ValidationError, model_validator

from langgraph_durable.core import Plan, Script
from langgraph_durable.errors import (
    ConfigurationError,
    RecordDamagedError,
    ToolCallDivergedError,
    ToolOutcomeUnknownError,
)
from langgraph_durable.keys import KeySchema, LedgerField
from langgraph_durable.lease import held_token

logger = logging.getLogger("langgraph_durable")

Policy = Literal["escalate", "retry", "fail", "readonly"]
POLICIES: tuple[str, ...] = ("escalate", "retry", "fail", "readonly")
Divergence = Literal["raise", "new_call"]

# Entry states. "damaged" is never stored: it is how an unverifiable record reads.
INTENT, RESULT, ERROR, INTERRUPTED, DAMAGED = "intent", "result", "error", "interrupted", "damaged"
_UNKNOWN_STATES = (INTENT, DAMAGED)
_FORMAT = 1
_LEDGER = "lg"  # record kind bound into each entry's checksum
_NS_SEP, _NS_END = "|", ":"
_FALLBACK_POSITION = 1_000_000  # positions of calls not found in an AI message start here
# Task attempts whose shared state is kept; an attempt evicted while still running would
# load its entries again, so this is far above the tasks one process runs at once.
_CONTEXTS_KEPT = 10_000

_current_key: ContextVar[str | None] = ContextVar("langgraph_durable_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """The idempotency key of the ledger-recorded call running now, else ``None``.

    The same for a call across crashes, replays and retries; different for every new
    call. Hand it to external APIs that deduplicate (payments, e-mail, tickets).
    """
    return _current_key.get()


class EscalationAnswer(BaseModel):
    """How a human resolves a call of unknown outcome (the ``Command(resume=...)`` value).

    ``retry`` runs the tool again with the same idempotency key; ``skip`` records
    ``result`` as the tool's output (it did take effect) without running it; ``fail``
    raises ``ToolOutcomeUnknownError`` in the graph.
    """

    action: Literal["retry", "skip", "fail"]
    result: Any = None

    @model_validator(mode="after")
    def _skip_needs_result(self) -> EscalationAnswer:
        if self.action == "skip" and "result" not in self.model_fields_set:
            raise ValueError('{"action": "skip"} needs the tool\'s output as "result"')
        return self


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded call, as ``ToolLedger.entries`` reports it."""

    field: str
    checkpoint_ns: str
    step: int
    task: str
    position: int
    name: str
    args_hash: str
    state: str  # intent | result | error | interrupted | damaged
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    args: Any = None
    attempts: int = 0
    # Escalations: every interrupt this call raised, numbered in the order the task
    # raises them (replays raise them all again in that order, so LangGraph matches
    # each stored answer to the same question), and the one whose answer applies to
    # the current attempt (None once acted on: an attempt that is lost again asks anew).
    escalations: tuple[int, ...] = ()
    escalation: int | None = None
    resolution: str | None = None  # how a human answered its escalation
    result: Any = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    damage: str | None = None  # why the record did not verify

    @property
    def outcome_unknown(self) -> bool:
        return self.state in _UNKNOWN_STATES


@dataclass(frozen=True)
class _Site:
    """Where one call is recorded, and what it is."""

    thread_id: str
    where: LedgerField  # the parts of ``field``
    task_prefix: str
    field: str
    ordered: bool  # position is the call's index in its AI message or its node
    args: Any
    key: str
    tool_call_id: str | None

    @property
    def name(self) -> str:
        return self.where.name

    @property
    def position(self) -> int:
        return self.where.position


@dataclass
class _Decision:
    replay: bool
    value: Any = None
    key: str = ""
    entry: LedgerEntry | None = None


class _TaskContext:
    """What the calls of one task attempt share: one read of the task's entries, the
    answers to its escalations, and the order of its calls."""

    def __init__(self, scratchpad: object) -> None:
        self.scratchpad = scratchpad  # held, so its id() is not reused while we are
        self.lock = threading.Lock()
        self.alock = asyncio.Lock()  # binds to a loop on first use
        self.loaded = False
        self.entries: dict[str, LedgerEntry] = {}
        self.ledger_damaged = False
        self.answers: dict[str, EscalationAnswer] = {}
        self.failure: BaseException | None = None  # raised by every call of the attempt
        self.positions = 0
        self.claimed: dict[tuple[str, str, str], int] = {}


R = TypeVar("R")


class ToolLedger:
    """Records every side-effecting call so that a resumed graph never repeats one.

    ``saver`` is the graph's ``RedisSaver`` or ``AsyncRedisSaver``: entries live in the
    thread's keys, so ``delete_thread``, ``copy_thread`` and ``ttl`` cover them.

    ``policies`` maps tool names to what happens when a call's outcome is unknown:
    ``"escalate"`` (the default; an ``interrupt()``), ``"retry"``, ``"fail"``, or
    ``"readonly"`` for tools without side effects, which are never recorded.
    ``on_divergence`` decides what a replayed call whose name or arguments differ from
    the recorded intent does: ``"raise"`` ``ToolCallDivergedError`` or run as a
    ``"new_call"``.

    Integrations: ``ToolNode(tools, wrap_tool_call=ledger.wrap_tool_call,
    awrap_tool_call=ledger.awrap_tool_call)``; ``ledger.middleware()`` for
    ``create_agent``; ``@ledger.durable`` for calls inside ordinary nodes.
    """

    def __init__(
        self,
        saver: Any,
        *,
        policies: Mapping[str, Policy] | None = None,
        default_policy: Policy = "escalate",
        on_divergence: Divergence = "raise",
    ) -> None:
        for name, policy in {**(policies or {}), "<default>": default_policy}.items():
            if policy not in POLICIES:
                raise ConfigurationError(
                    f"unknown ledger policy {policy!r} for {name!r}: use one of {POLICIES}"
                )
        if not hasattr(saver, "core") or not hasattr(saver, "_drive"):
            raise ConfigurationError(
                f"ToolLedger needs a langgraph-durable RedisSaver or AsyncRedisSaver, got "
                f"{type(saver).__name__}"
            )
        if on_divergence not in ("raise", "new_call"):
            raise ConfigurationError(
                f"on_divergence must be 'raise' or 'new_call', got {on_divergence!r}"
            )
        self.saver = saver
        self.policies = dict(policies or {})
        self.default_policy = default_policy
        self.on_divergence = on_divergence
        self._contexts: OrderedDict[int, _TaskContext] = OrderedDict()
        self._contexts_lock = threading.Lock()
        self._warned_outside = False

    def policy(self, name: str) -> Policy:
        return self.policies.get(name, self.default_policy)

    # -- records --------------------------------------------------------------------
    @property
    def _keys(self) -> KeySchema:
        return self.saver.core.keys

    def _seal(self, thread_id: str, entry: LedgerEntry) -> bytes:
        serde = self.saver.core.serde
        body = {
            "v": _FORMAT,
            "state": entry.state,
            "key": entry.idempotency_key,
            "call_id": entry.tool_call_id,
            "args": entry.args,
            "attempts": entry.attempts,
            "escalation": entry.escalation,
            "escalations": list(entry.escalations),
            "resolution": entry.resolution,
            "result": list(serde.dumps_typed(entry.result)) if entry.state == RESULT else None,
            "error": entry.error,
            "started": entry.started_at,
            "finished": entry.finished_at,
        }
        identity = KeySchema.identity(_LEDGER, thread_id, entry.field)
        return self.saver.core.envelope.seal(identity, msgpack.packb(body, use_bin_type=True))

    def _open(self, thread_id: str, raw_field: bytes | str, record: bytes | None) -> LedgerEntry:
        field = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
        base = LedgerEntry(field=field, **vars(self._keys.parse_ledger_field(field)), state=DAMAGED)
        try:
            raw = self.saver.core.envelope.open(
                KeySchema.identity(_LEDGER, thread_id, field), record
            )
            body = msgpack.unpackb(raw, raw=False)
            if not isinstance(body, dict) or body.get("v") != _FORMAT:
                raise RecordDamagedError("undecodable body")
            result = body["result"]
            return replace(
                base,
                state=body["state"],
                idempotency_key=body["key"],
                tool_call_id=body["call_id"],
                args=body["args"],
                attempts=body["attempts"],
                escalation=body["escalation"],
                escalations=tuple(body["escalations"]),
                resolution=body["resolution"],
                result=self.saver.core.load_value(*result) if result is not None else None,
                error=body["error"],
                started_at=body["started"],
                finished_at=body["finished"],
            )
        except RecordDamagedError as exc:
            return replace(base, damage=exc.reason)
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            return replace(base, damage=f"undecodable body ({type(exc).__name__})")

    # -- plans ----------------------------------------------------------------------
    def _read(
        self, thread_id: str, bounds: tuple[str, str], prefix: str = ""
    ) -> Plan[tuple[list[LedgerEntry], bool, list[bytes]]]:
        """Entries within ``bounds`` (whose fields start with ``prefix``), also those whose
        index member was lost; whether the ledger was ever damaged; the fields of those
        the index lost (``_load`` re-indexes them)."""
        tk = self._keys.thread(thread_id)
        wrongtype, damaged, flat, unindexed = yield Script(
            "ledger_read", tk.with_twins(), [*bounds, "", prefix]
        )
        if wrongtype:
            logger.error(
                "langgraph-durable: ledger keys of thread %r hold the wrong type: %s",
                thread_id,
                [k.decode() if isinstance(k, bytes) else k for k in wrongtype],
            )
        entries = []
        for i in range(0, len(flat), 2):
            try:
                entries.append(self._open(thread_id, flat[i], flat[i + 1] or None))
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
        return entries, bool(damaged), list(unindexed)

    def _write(
        self,
        thread_id: str,
        entries: Iterable[LedgerEntry],
        replacing: Iterable[LedgerEntry] = (),
    ) -> Plan[None]:
        """Store entries; the bytes of any damaged record they replace go to quarantine."""
        tk = self._keys.thread(thread_id)
        damaged = {e.field: e.damage for e in replacing if e.state == DAMAGED}
        args: list[Any] = [self.saver.core._ttl_arg, held_token(self._keys.prefix, thread_id)]
        for entry in entries:
            reason = damaged.get(entry.field) or ""
            args += [
                entry.field,
                self._seal(thread_id, entry),
                self._keys.quarantine_field(_LEDGER, entry.field) if reason else "",
                reason,
            ]
        yield Script("ledger_write", tk.with_twins(), args)
        yield from self.saver.core.replicated(tk)

    def _load(self, ctx: _TaskContext, site: _Site) -> Plan[None]:
        entries, damaged, unindexed = yield from self._read(
            site.thread_id, self._keys.ledger_task_range(site.task_prefix), site.task_prefix
        )
        if unindexed:  # put the index back together (an empty record re-indexes a field)
            token = held_token(self._keys.prefix, site.thread_id)
            args: list[Any] = [self.saver.core._ttl_arg, token]
            args += [x for field in unindexed for x in (field, "", "", "")]
            yield Script("ledger_write", self._keys.thread(site.thread_id).with_twins(), args)
        ctx.entries = {e.field: e for e in entries}
        ctx.ledger_damaged = damaged
        for e in entries:
            if e.damage:
                logger.error(
                    "langgraph-durable: ledger entry %r of thread %r is damaged (%s); its "
                    "outcome is treated as unknown",
                    e.field,
                    site.thread_id,
                    e.damage,
                )

    def _prepare_parallel(
        self, ctx: _TaskContext, site: _Site, message_calls: list[dict[str, Any]]
    ) -> Plan[list[tuple[int, LedgerEntry]]]:
        """Load a tool task's entries and number every unknown outcome to escalate.

        The calls of one ToolNode task run in parallel, but LangGraph matches resume
        answers to ``interrupt()`` calls by their order within the task. So escalations
        are numbered once, persisted before any is raised, and always raised in that
        order by one caller (``_ask``), on every replay of the task.
        """
        yield from self._load(ctx, site)
        fresh = [
            e
            for e in sorted(ctx.entries.values(), key=lambda e: e.position)
            if e.outcome_unknown and e.escalation is None and self.policy(e.name) == "escalate"
        ]
        if fresh:
            first = _next_slot(ctx.entries.values())
            fresh = [
                self._as_intent(
                    e,
                    site.thread_id,
                    escalation=first + i,
                    escalations=(*e.escalations, first + i),
                    call=_call_at(message_calls, e),
                )
                for i, e in enumerate(fresh)
            ]
            yield from self._write(site.thread_id, fresh, replacing=ctx.entries.values())
            ctx.entries.update({e.field: e for e in fresh})
        slots = {slot: e for e in ctx.entries.values() for slot in e.escalations}
        return sorted(slots.items())

    def _escalate_inline(self, ctx: _TaskContext, site: _Site) -> Plan[LedgerEntry | None]:
        """The entry of a sequential call, numbered and persisted if it must escalate now;
        ``None`` if it never escalated."""
        entry = ctx.entries.get(site.field)
        if entry is None:
            return None
        if (
            entry.outcome_unknown
            and entry.escalation is None
            and self.policy(entry.name) == "escalate"
        ):
            slot = _next_slot(ctx.entries.values())
            numbered = self._as_intent(
                entry, site.thread_id, escalation=slot, escalations=(*entry.escalations, slot)
            )
            yield from self._write(site.thread_id, [numbered], replacing=[entry])
            ctx.entries[entry.field] = entry = numbered
        return entry if entry.escalations else None

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

    def _begin(self, ctx: _TaskContext, site: _Site, policy: Policy) -> Plan[_Decision]:
        """Decide what a call does on this attempt; record its intent if it runs."""
        if ctx.failure is not None:
            raise _fresh(ctx.failure)
        entry = ctx.entries.get(site.field)
        key = site.key
        attempts = 0
        if entry is None:
            if site.ordered and self.on_divergence == "raise":
                for other in ctx.entries.values():
                    if other.position == site.position:
                        raise ToolCallDivergedError(
                            thread_id=site.thread_id,
                            position=site.position,
                            recorded_name=other.name,
                            recorded_args=other.args,
                            requested_name=site.name,
                            requested_args=site.args,
                        )
            if ctx.ledger_damaged:  # an entry of this task may have been lost with it
                raise self._unknown(site, key, "the ledger of this thread was damaged")
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
                        value = _skipped_result(site, answer.result)
                        done = replace(
                            self._as_intent(entry, site.thread_id),
                            state=RESULT,
                            result=value,
                            resolution="skip",
                            finished_at=time.time(),
                        )
                        yield from self._write(site.thread_id, [done], replacing=[entry])
                        return _Decision(replay=True, value=value, key=key, entry=done)
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
            resolution=(ctx.answers[site.field].action if site.field in ctx.answers else None),
            started_at=time.time(),
        )
        yield from self._write(site.thread_id, [intent], replacing=[entry] if entry else [])
        return _Decision(replay=False, key=key, entry=intent)

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

    # -- escalation -----------------------------------------------------------------
    def _ask(
        self, ctx: _TaskContext, site: _Site, escalations: list[tuple[int, LedgerEntry]]
    ) -> None:
        """Raise every escalation's ``interrupt()`` in its number's order; keep the answers
        that apply to current attempts, or the interrupt (or invalid answer) that stops
        the task, for every call."""
        for slot, entry in escalations:
            try:
                answer = interrupt(
                    _escalation_value(site.thread_id, entry), response_schema=EscalationAnswer
                )
            except (GraphInterrupt, ValidationError) as exc:  # an invalid answer can be
                ctx.failure = exc  # answered again: LangGraph stores nothing for it
                return
            if slot == entry.escalation:
                ctx.answers[entry.field] = answer

    # -- where a call is recorded -----------------------------------------------------
    def _context(self, config: RunnableConfig) -> _TaskContext | None:
        scratchpad = config.get("configurable", {}).get("__pregel_scratchpad")
        if scratchpad is None:
            return None
        with self._contexts_lock:
            ctx = self._contexts.get(id(scratchpad))
            if ctx is None or ctx.scratchpad is not scratchpad:
                ctx = _TaskContext(scratchpad)
                self._contexts[id(scratchpad)] = ctx
                while len(self._contexts) > _CONTEXTS_KEPT:
                    self._contexts.popitem(last=False)
            return ctx

    def _site(
        self,
        config: RunnableConfig,
        ctx: _TaskContext,
        name: str,
        args: Any,
        *,
        tool_call_id: str | None,
        position: int | None,
    ) -> _Site | None:
        conf = config.get("configurable", {})
        meta = config.get("metadata", {})
        thread_id = conf.get("thread_id")
        step = meta.get("langgraph_step")
        if thread_id is None or step is None:
            return None
        ns = _without_own_task_id(str(conf.get("checkpoint_ns", "")))
        task = json.dumps(
            [meta.get("langgraph_node"), list(meta.get("langgraph_path") or ())],
            default=str,
            separators=(",", ":"),
        )
        prefix = self._keys.ledger_task(ns, int(step), task)
        args, args_hash = _canonical_args(args)
        ordered = position is not None
        if position is None:
            with ctx.lock:
                claim = (str(tool_call_id), name, args_hash)
                position = _FALLBACK_POSITION + ctx.claimed.get(claim, 0)
                ctx.claimed[claim] = ctx.claimed.get(claim, 0) + 1
        field = self._keys.ledger_field(prefix, position, name, args_hash)
        return _Site(
            thread_id=str(thread_id),
            where=LedgerField(ns, int(step), task, position, name, args_hash),
            task_prefix=prefix,
            field=field,
            ordered=ordered,
            args=args,
            key=_idempotency_key(str(thread_id), field),
            tool_call_id=tool_call_id,
        )

    def _tool_site(self, request: Any) -> tuple[_TaskContext, _Site, list[dict[str, Any]]] | None:
        call = request.tool_call
        if self.policy(call["name"]) == "readonly":
            return None
        runtime = getattr(request, "runtime", None)
        config = getattr(runtime, "config", None)
        if config is None:
            return self._outside()
        ctx = self._context(config)
        if ctx is None:
            return self._outside()
        position, message_calls = _position_in_message(request.state, call)
        site = self._site(
            config,
            ctx,
            call["name"],
            call.get("args", {}),
            tool_call_id=call.get("id"),
            position=position,
        )
        return (ctx, site, message_calls) if site is not None else self._outside()

    def _outside(self) -> None:
        if not self._warned_outside:
            self._warned_outside = True
            logger.warning(
                "langgraph-durable: a ledger-wrapped call ran outside a checkpointed graph "
                "task (no thread_id); it is not recorded"
            )

    # -- ToolNode -------------------------------------------------------------------
    def wrap_tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        """``ToolNode(wrap_tool_call=...)``: replay a recorded result or record this call."""
        found = self._tool_site(request)
        if found is None:
            return execute(request)
        ctx, site, message_calls = found
        with ctx.lock:
            if not ctx.loaded:
                escalations = self.saver._drive_sync(
                    self._prepare_parallel(ctx, site, message_calls)
                )
                ctx.loaded = True
                self._ask(ctx, site, escalations)
        decision = self.saver._drive_sync(self._begin(ctx, site, self.policy(site.name)))
        if decision.replay:
            return decision.value
        return self._run_sync(site, decision, lambda: execute(request))

    async def awrap_tool_call(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        """``ToolNode(awrap_tool_call=...)``: the async twin of ``wrap_tool_call``."""
        found = self._tool_site(request)
        if found is None:
            return await execute(request)
        ctx, site, message_calls = found
        async with ctx.alock:
            if not ctx.loaded:
                escalations = await self.saver._drive_async(
                    self._prepare_parallel(ctx, site, message_calls)
                )
                ctx.loaded = True
                self._ask(ctx, site, escalations)
        decision = await self.saver._drive_async(self._begin(ctx, site, self.policy(site.name)))
        if decision.replay:
            return decision.value
        return await self._run_async(site, decision, lambda: execute(request))

    def _run_sync(self, site: _Site, decision: _Decision, call: Callable[[], R]) -> R:
        token = _current_key.set(decision.key)
        try:
            result = call()
        except GraphBubbleUp:  # the tool itself interrupted: LangGraph reruns it on resume
            self.saver._drive_sync(self._finish(site, decision, INTERRUPTED))
            raise
        except Exception as exc:
            self.saver._drive_sync(self._finish(site, decision, ERROR, error=_describe(exc)))
            raise
        finally:
            _current_key.reset(token)
        self.saver._drive_sync(self._finish(site, decision, RESULT, result=result))
        return result

    async def _run_async(
        self, site: _Site, decision: _Decision, call: Callable[[], Awaitable[R]]
    ) -> R:
        token = _current_key.set(decision.key)
        try:
            result = await call()
        except GraphBubbleUp:
            await self.saver._drive_async(self._finish(site, decision, INTERRUPTED))
            raise
        except Exception as exc:
            await self.saver._drive_async(self._finish(site, decision, ERROR, error=_describe(exc)))
            raise
        finally:
            _current_key.reset(token)
        await self.saver._drive_async(self._finish(site, decision, RESULT, result=result))
        return result

    # -- calls inside ordinary nodes --------------------------------------------------
    def durable(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        policy: Policy | None = None,
    ) -> Any:
        """Make a side-effecting function durable when called inside a graph node.

        ``@ledger.durable`` or ``@ledger.durable(name=..., policy=...)``; sync and async
        functions. A call is keyed by its task and its position among the durable calls
        of that task (call them in a deterministic order), and by its name and
        arguments. Outside a checkpointed graph the function just runs.
        """
        if policy is not None and policy not in POLICIES:
            raise ConfigurationError(f"unknown ledger policy {policy!r}: use one of {POLICIES}")

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            call_name = name or getattr(func, "__name__", "call")

            def effective_policy() -> Policy:
                return policy or self.policy(call_name)

            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    found = self._node_site(call_name, args, kwargs, effective_policy())
                    if found is None:
                        return await func(*args, **kwargs)
                    ctx, site = found
                    async with ctx.alock:
                        if not ctx.loaded:
                            await self.saver._drive_async(self._load(ctx, site))
                            ctx.loaded = True
                    escalated = await self.saver._drive_async(self._escalate_inline(ctx, site))
                    self._answer_inline(ctx, site, escalated)
                    decision = await self.saver._drive_async(
                        self._begin(ctx, site, effective_policy())
                    )
                    if decision.replay:
                        return decision.value
                    return await self._run_async(site, decision, lambda: func(*args, **kwargs))

                return async_wrapper

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                found = self._node_site(call_name, args, kwargs, effective_policy())
                if found is None:
                    return func(*args, **kwargs)
                ctx, site = found
                with ctx.lock:
                    if not ctx.loaded:
                        self.saver._drive_sync(self._load(ctx, site))
                        ctx.loaded = True
                escalated = self.saver._drive_sync(self._escalate_inline(ctx, site))
                self._answer_inline(ctx, site, escalated)
                decision = self.saver._drive_sync(self._begin(ctx, site, effective_policy()))
                if decision.replay:
                    return decision.value
                return self._run_sync(site, decision, lambda: func(*args, **kwargs))

            return wrapper

        return decorate(fn) if fn is not None else decorate

    def _node_site(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], policy: Policy
    ) -> tuple[_TaskContext, _Site] | None:
        if policy == "readonly":
            return None
        try:
            from langgraph.config import get_config

            config = get_config()
        except RuntimeError:
            return self._outside()
        ctx = self._context(config)
        if ctx is None:
            return self._outside()
        with ctx.lock:
            position = ctx.positions
            ctx.positions += 1
        site = self._site(
            config,
            ctx,
            name,
            {"args": list(args), "kwargs": kwargs},
            tool_call_id=None,
            position=position,
        )
        return (ctx, site) if site is not None else self._outside()

    def _answer_inline(self, ctx: _TaskContext, site: _Site, entry: LedgerEntry | None) -> None:
        """A sequential call escalates at its own place in the node, so its
        ``interrupt()`` calls keep their order among the node's other interrupts."""
        if entry is None:
            return
        for slot in entry.escalations:
            answer = interrupt(
                _escalation_value(site.thread_id, entry), response_schema=EscalationAnswer
            )
            if slot == entry.escalation:
                ctx.answers[site.field] = answer

    # -- inspection -----------------------------------------------------------------
    def entries(self, thread_id: str) -> list[LedgerEntry]:
        """Every ledger entry of a thread, in task and position order (damaged ones too)."""
        entries, _, _ = self.saver._drive_sync(self._read(str(thread_id), ("-", "+")))
        return entries

    async def aentries(self, thread_id: str) -> list[LedgerEntry]:
        entries, _, _ = await self.saver._drive_async(self._read(str(thread_id), ("-", "+")))
        return entries

    def middleware(self) -> Any:
        """An ``AgentMiddleware`` for LangChain's ``create_agent`` (needs ``langchain``)."""
        from langgraph_durable.middleware import LedgerMiddleware

        return LedgerMiddleware(self)


# -- helpers ------------------------------------------------------------------------
def _fresh(exc: BaseException) -> BaseException:
    # Parallel calls re-raise one stopping interrupt; each gets its own exception object.
    if isinstance(exc, GraphInterrupt):
        return GraphInterrupt(*exc.args)
    return exc


def _next_slot(entries: Iterable[LedgerEntry]) -> int:
    return max((slot for e in entries for slot in e.escalations), default=-1) + 1


def _canonical(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


def _canonical_args(args: Any) -> tuple[Any, str]:
    """Arguments as plain JSON data (what the ledger stores) and their hash."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=_canonical)
    return json.loads(text), hashlib.sha256(text.encode()).hexdigest()[:32]


def _idempotency_key(thread_id: str, field: str) -> str:
    digest = hashlib.sha256(thread_id.encode() + b"\x00" + field.encode()).hexdigest()
    return f"lgd-{digest[:32]}"


def _without_own_task_id(ns: str) -> str:
    """The running task's namespace without its own (replay-unstable) task id."""
    head, _, last = ns.rpartition(_NS_SEP)
    name = last.split(_NS_END, 1)[0]
    return f"{head}{_NS_SEP}{name}" if head else name


def _messages_of(state: Any) -> list[Any]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        messages = state.get("messages")
    else:
        messages = getattr(state, "messages", None)
    return messages if isinstance(messages, list) else []


def _position_in_message(
    state: Any, call: Mapping[str, Any]
) -> tuple[int | None, list[dict[str, Any]]]:
    """The call's index in the newest AI message that holds it (if exactly one of its
    calls matches; identical duplicates fall back to the claim order), and its calls."""
    for message in reversed(_messages_of(state)):
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        calls = cast(list[dict[str, Any]], message.tool_calls)
        matches = [
            i
            for i, tc in enumerate(calls)
            if tc.get("id") == call.get("id")
            and tc.get("name") == call.get("name")
            and tc.get("args") == call.get("args")
        ]
        if matches:
            return (matches[0] if len(matches) == 1 else None), calls
    return None, []


def _call_at(calls: list[dict[str, Any]], entry: LedgerEntry) -> dict[str, Any] | None:
    """The AI message's call recorded in ``entry``'s field, if it is that call."""
    if entry.position < len(calls):
        call = calls[entry.position]
        if (
            call.get("name") == entry.name
            and _canonical_args(call.get("args", {}))[1] == entry.args_hash
        ):
            return call
    return None


def _skipped_result(site: _Site, result: Any) -> Any:
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


def _escalation_value(thread_id: str, entry: LedgerEntry) -> dict[str, Any]:
    return {
        "type": "tool_outcome_unknown",
        "tool_call_id": entry.tool_call_id,
        "name": entry.name,
        "args": entry.args,
        "idempotency_key": entry.idempotency_key,
        "thread_id": thread_id,
        "checkpoint_ns": entry.checkpoint_ns,
        "step": entry.step,
        "attempts": entry.attempts,
        "started_at": entry.started_at,
        "reason": _unknown_reason(entry),
        "answers": ["retry", "skip", "fail"],
    }


def _unknown_reason(entry: LedgerEntry) -> str:
    if entry.damage:
        return f"its ledger record is damaged ({entry.damage})"
    return "the process stopped between its intent and its result"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"[:2000]
