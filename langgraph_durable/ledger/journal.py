"""The model-call journal: a replayed task gets the model's recorded answer, not a new one.

A model asked again after a crash rarely answers the same way (fresh tool-call ids,
other wording), so a resumed agent would propose calls that differ from the recorded
ones. Durable-execution systems journal the model call as well as the tool call; this
module does that with the ledger's own entries (same record, envelope and allowlist).

Owns where a model call is recorded and when its answer is replayed. Rules it keeps:
  * A model call is recorded at its *place*: its task (as every ledger call) and its
    order among the task's model calls, at ``MODEL_POSITION`` and up, under the name
    ``"model"``. Its request is no part of the match: prompts carry timestamps and
    message ids are fresh on every replay. A replayed call gets the recorded answer
    whatever its request; one whose request holds another number of messages than the
    recorded one (the conversation before it is not the recorded one, e.g. state edited
    at the same step) is logged at WARNING and still gets the recorded answer.
  * It has no side effects, so it is written once, after the call (no intent). A crash
    during the call leaves nothing and the model is simply asked again; a damaged
    record is asked again too (and quarantined as it is replaced). Never escalated.
  * A call that raises an error records nothing and gives its place back when no later
    call of the task has claimed one, so the answer of a retried call is the one
    replayed. A stream not read to the end records nothing and keeps its place: a
    replay asks again there (and stops reading it again), later calls keep theirs.
  * A node re-run by a LangGraph ``RetryPolicy`` is a new attempt of its task: it gets
    the answers its failed try recorded, as after a crash, so calls made from them
    (``@durable``) do not diverge.
  * What is stored must load back under the saver's allowlist: a value naming a type
    the allowlist refuses (a structured response of your own class) raises
    ``ConfigurationError`` naming it before anything is written.
Plans and a thin sync and async shell; ``journaled_model.py`` and ``middleware.py`` use
them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_durable.errors import ConfigurationError, RecordDamagedError
from langgraph_durable.ledger.entries import MODEL_CALL, MODEL_POSITION, RESULT, LedgerEntry
from langgraph_durable.ledger.running import CallRunner
from langgraph_durable.ledger.sites import _Site, _TaskContext, call_site
from langgraph_durable.ledger.wiring import MODEL_ADVICE, refuse_sync_on_loop
from langgraph_durable.ops import Plan
from langgraph_durable.serde import accepted_types, load

logger = logging.getLogger("langgraph_durable")


@dataclass
class ModelCall:
    """One model call at its place: the recorded answer, if there is one."""

    ctx: _TaskContext
    site: _Site
    messages: int  # how many messages its request holds
    ledger: Any  # what records it: the ledger, or its view on the task's saver (_bound)
    recorded: LedgerEntry | None = None  # its answer is ``recorded.result``


class ModelJournal(CallRunner):
    """The model-call journal of ``ToolLedger``."""

    def _model_call(self, config: RunnableConfig, request: Any) -> ModelCall | None:
        """Claim the next model-call place of the running task; None outside a task."""
        ctx = self._context(config)
        if ctx is None:
            return None
        ledger = self._bound(config)
        with ctx.lock:
            position = MODEL_POSITION + ctx.model_calls
            ctx.model_calls += 1
        site = call_site(
            ledger._keys, config, ctx, MODEL_CALL, None, tool_call_id=None, position=position
        )
        if site is None:
            return None
        return ModelCall(ctx, site, _count(request), ledger)

    def _look_up(self, call: ModelCall) -> Plan[ModelCall]:
        """Read the task's entries (once per task attempt) and find the recorded answer.
        The caller holds the task's lock."""
        ctx, site = call.ctx, call.site
        if not ctx.loaded:
            yield from self._load(ctx, site)
            ctx.loaded = True
        entry = ctx.entries.get(site.field)
        if entry is not None and entry.state == RESULT:
            recorded = (entry.args or {}).get("messages")
            if recorded != call.messages:
                logger.warning(
                    "langgraph-durable: thread %r, step %d: the model call recorded at "
                    "this place had %s request messages, this one has %d; replaying the "
                    "recorded answer (the journal matches by place)",
                    site.thread_id,
                    site.where.step,
                    recorded,
                    call.messages,
                )
            call.recorded = entry
        return call

    def _record(self, call: ModelCall, value: Any) -> Plan[None]:
        """Store ``value``, the model's answer, at the call's place (one write)."""
        self._check_loadable(value)
        site = call.site
        now = time.time()
        entry = LedgerEntry(
            field=site.field,
            **vars(site.where),
            state=RESULT,
            idempotency_key=site.key,
            args={"messages": call.messages},
            attempts=1,
            result=value,
            started_at=now,
            finished_at=now,
        )
        previous = call.ctx.entries.get(site.field)
        yield from self._write(site.thread_id, [entry], replacing=[previous] if previous else [])
        call.ctx.entries[site.field] = entry

    def _check_loadable(self, value: Any) -> None:
        serde = self.saver.core.serde
        try:
            load(serde, *serde.dumps_typed(value), accepted_types(serde))
        except RecordDamagedError as exc:
            raise ConfigurationError(
                f"the ledger cannot journal this model answer: {exc.reason}. Add its "
                "type to the saver's allowed_types= (e.g. the class of a structured "
                f"response), or journal no model calls (got a {type(value).__name__})"
            ) from exc

    def _give_back(self, call: ModelCall) -> None:
        """A call that raised gives its place back if no later call claimed one."""
        with call.ctx.lock:
            if call.ctx.model_calls == call.site.position - MODEL_POSITION + 1:
                call.ctx.model_calls -= 1

    # -- the shells -------------------------------------------------------------------
    def open_model_call(self, config: RunnableConfig, request: Any) -> ModelCall | None:
        """The model call about to be made in the running task, with its recorded answer
        if it has one; None outside a checkpointed graph task (nothing is recorded)."""
        call = self._model_call(config, request)
        if call is None:
            return None
        ledger = call.ledger
        refuse_sync_on_loop(ledger.saver, MODEL_ADVICE)
        with call.ctx.lock:
            return ledger.saver.drive(ledger._look_up(call))  # type: ignore[no-any-return]

    async def aopen_model_call(self, config: RunnableConfig, request: Any) -> ModelCall | None:
        """``open_model_call`` for async code."""
        call = self._model_call(config, request)
        if call is None:
            return None
        ledger = call.ledger
        async with call.ctx.alock:
            return await ledger.saver.adrive(ledger._look_up(call))  # type: ignore[no-any-return]

    def close_model_call(self, call: ModelCall, value: Any) -> None:
        """Record the model's answer ``value`` (once the call, or its stream, completed)."""
        call.ledger.saver.drive(call.ledger._record(call, value))

    async def aclose_model_call(self, call: ModelCall, value: Any) -> None:
        """``close_model_call`` for async code."""
        await call.ledger.saver.adrive(call.ledger._record(call, value))

    def abandon_model_call(self, call: ModelCall) -> None:
        """The call raised an error: nothing is recorded, its place is given back."""
        self._give_back(call)


def _count(request: Any) -> int:
    """How many messages a model request holds (a list, a prompt value, a string)."""
    if isinstance(request, (list, tuple)):
        return len(request)
    to_messages = getattr(request, "to_messages", None)
    return len(to_messages()) if callable(to_messages) else 1
