"""Running one recorded call: its task attempt, the escalations' ``interrupt()``, the call.

Owns what every integration (ToolNode wrappers, ``@durable``) shares once it knows where
a call is recorded: the saver it is recorded through (the ledger's own, else the one its
task runs with: ``_bound``), the context of the task attempt it belongs to, raising the
task's escalations (unknown outcomes and divergences alike, ``divergence.question`` says
what each asks) and running the call between its intent and its result, in a thin sync
and a thin async shell around the same plans.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import interrupt
from pydantic import ValidationError

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.core.keys import KeySchema
from langgraph_durable.core.ops import Plan, traced
from langgraph_durable.ledger.divergence import question
from langgraph_durable.ledger.entries import ERROR, INTERRUPTED, RESULT, LedgerEntry, describe_error
from langgraph_durable.ledger.plans import CallDecision, LedgerPlans
from langgraph_durable.ledger.sites import Site, TaskContext, current_key, task_place
from langgraph_durable.ledger.wiring import check_recordable, durable_saver, run_saver

logger = logging.getLogger("langgraph_durable")
R = TypeVar("R")
# Task attempts whose shared state is kept; an attempt evicted while still running would
# load its entries again, so this is far above the tasks one process runs at once.
_CONTEXTS_KEPT = 10_000
_SCRATCHPAD = "__pregel_scratchpad"  # LangGraph's per-task-attempt state, in the config


class CallRunner(LedgerPlans):
    """Task contexts, escalations and the sync/async shells of ``ToolLedger``."""

    def __init__(self, saver: Any = None) -> None:
        if saver is not None and durable_saver(saver) is None:
            raise ConfigurationError(
                f"ToolLedger needs a langgraph-durable RedisSaver or AsyncRedisSaver, got "
                f"{type(saver).__name__}"
            )
        self._saver = durable_saver(saver)
        self._contexts: OrderedDict[int, TaskContext] = OrderedDict()
        self._contexts_lock = threading.Lock()
        # What this process knows of the model answers it handed out (journal.py):
        # (thread, tool-call id) -> answer; (thread, field) -> (task id, node attempt).
        self._answers: OrderedDict[tuple[str, str], LedgerEntry] = OrderedDict()
        self._recorded_by: OrderedDict[tuple[str, str], tuple[str | None, int]] = OrderedDict()
        self._warned_outside = False

    @property
    def saver(self) -> Any:
        """The saver entries are recorded through: the one the ledger was given, or (in
        a graph task, for a ledger without one) the one the task runs with."""
        if self._saver is None:
            raise ConfigurationError(
                "this ToolLedger has no saver of its own: it records through the saver "
                "its graph runs with, found in each call's run config. Outside a run "
                "(entries(), aentries()), pass one: ToolLedger(saver)"
            )
        return self._saver

    def _bound(self, config: RunnableConfig | None) -> Any:
        """This ledger, or for a ledger without a saver of its own inside a graph task, a
        view of it on the saver that task runs with (sharing its settings and task
        contexts); ``ConfigurationError`` if the task runs with no langgraph-durable saver.
        Outside a task the call runs unrecorded, so no saver is needed."""
        if self._saver is not None or config is None:
            return self
        if config.get("configurable", {}).get(_SCRATCHPAD) is None:
            return self
        view = copy.copy(self)  # shallow: the contexts, their lock and the settings shared
        view._saver = run_saver(config)
        return view

    def _ask(self, ctx: TaskContext, escalations: list[tuple[int, LedgerEntry]]) -> None:
        """Raise every escalation's ``interrupt()`` in its number's order; keep the answers
        that apply to current attempts, or the interrupt (or invalid answer) that stops
        the task, for every call."""
        for slot, entry in escalations:
            value, schema = question(
                ctx.place.thread_id, slot, entry, {**ctx.suspects, **ctx.entries}
            )
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

    def _context(self, config: RunnableConfig, keys: KeySchema) -> TaskContext | None:
        """The context of the task attempt whose config this is; None outside a
        checkpointed graph task (its calls run unrecorded)."""
        scratchpad = config.get("configurable", {}).get(_SCRATCHPAD)
        if scratchpad is None:
            return None
        with self._contexts_lock:
            ctx = self._contexts.get(id(scratchpad))
            if ctx is None or ctx.scratchpad is not scratchpad:
                place = task_place(keys, config)
                if place is None:
                    return None
                ctx = TaskContext(scratchpad, place)
                self._contexts[id(scratchpad)] = ctx
                while len(self._contexts) > _CONTEXTS_KEPT:
                    self._contexts.popitem(last=False)
            return ctx

    def _outside(self) -> None:
        if not self._warned_outside:
            self._warned_outside = True
            logger.warning(
                "langgraph-durable: a ledger-wrapped call ran outside a checkpointed graph "
                "task (no thread_id); it is not recorded"
            )

    def _run_sync(self, site: Site, decision: CallDecision, call: Callable[[], R]) -> R:
        token = current_key.set(decision.key)
        try:
            result = check_recordable(call())
        except GraphBubbleUp:  # the tool itself interrupted: LangGraph reruns it on resume
            self.saver.drive(_finished(self._finish(site, decision, INTERRUPTED), site))
            raise
        except Exception as exc:
            self.saver.drive(
                _finished(self._finish(site, decision, ERROR, error=describe_error(exc)), site)
            )
            raise
        finally:
            current_key.reset(token)
        self.saver.drive(_finished(self._finish(site, decision, RESULT, result=result), site))
        return result

    async def _run_async(
        self, site: Site, decision: CallDecision, call: Callable[[], Awaitable[R]]
    ) -> R:
        token = current_key.set(decision.key)
        try:
            result = check_recordable(await call())
        except GraphBubbleUp:
            await self.saver.adrive(_finished(self._finish(site, decision, INTERRUPTED), site))
            raise
        except Exception as exc:
            await self.saver.adrive(
                _finished(self._finish(site, decision, ERROR, error=describe_error(exc)), site)
            )
            raise
        finally:
            current_key.reset(token)
        await self.saver.adrive(
            _finished(self._finish(site, decision, RESULT, result=result), site)
        )
        return result


def _finished(plan: Plan[None], site: Site) -> Plan[None]:
    """Recording a call's outcome, as the saver operation ``ledger.finish``."""
    return traced("ledger.finish", plan, site.thread_id)
