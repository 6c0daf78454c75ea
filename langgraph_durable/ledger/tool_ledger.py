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

Where each part lives: ``entries.py`` (what an entry holds, its record), ``sites.py``
(where a call is recorded), ``plans.py`` (the Redis conversation and each attempt's
decision), ``retention.py`` (which entries retention drops), and here ``ToolLedger``,
the public face: ToolNode wrappers, ``@durable``, the escalations' ``interrupt()``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import interrupt
from pydantic import ValidationError

from langgraph_durable.errors import ConfigurationError
from langgraph_durable.ledger.entries import (
    ERROR,
    INTERRUPTED,
    POLICIES,
    RESULT,
    Divergence,
    EscalationAnswer,
    LedgerEntry,
    Policy,
    _describe,
    _escalation_value,
)
from langgraph_durable.ledger.plans import LedgerPlans, _Decision
from langgraph_durable.ledger.sites import (
    _current_key,
    _position_in_message,
    _Site,
    _TaskContext,
    call_site,
)

logger = logging.getLogger("langgraph_durable")
R = TypeVar("R")
# Task attempts whose shared state is kept; an attempt evicted while still running would
# load its entries again, so this is far above the tasks one process runs at once.
_CONTEXTS_KEPT = 10_000


class ToolLedger(LedgerPlans):
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
        if not hasattr(saver, "core") or not hasattr(saver, "drive"):
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
        """The policy of the tool ``name``: its own, else the default."""
        return self.policies.get(name, self.default_policy)

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
        site = call_site(
            self._keys,
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
                escalations = self.saver.drive(self._prepare_parallel(ctx, site, message_calls))
                ctx.loaded = True
                self._ask(ctx, site, escalations)
        decision = self.saver.drive(self._begin(ctx, site, self.policy(site.name)))
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
                escalations = await self.saver.adrive(
                    self._prepare_parallel(ctx, site, message_calls)
                )
                ctx.loaded = True
                self._ask(ctx, site, escalations)
        decision = await self.saver.adrive(self._begin(ctx, site, self.policy(site.name)))
        if decision.replay:
            return decision.value
        return await self._run_async(site, decision, lambda: execute(request))

    def _run_sync(self, site: _Site, decision: _Decision, call: Callable[[], R]) -> R:
        token = _current_key.set(decision.key)
        try:
            result = call()
        except GraphBubbleUp:  # the tool itself interrupted: LangGraph reruns it on resume
            self.saver.drive(self._finish(site, decision, INTERRUPTED))
            raise
        except Exception as exc:
            self.saver.drive(self._finish(site, decision, ERROR, error=_describe(exc)))
            raise
        finally:
            _current_key.reset(token)
        self.saver.drive(self._finish(site, decision, RESULT, result=result))
        return result

    async def _run_async(
        self, site: _Site, decision: _Decision, call: Callable[[], Awaitable[R]]
    ) -> R:
        token = _current_key.set(decision.key)
        try:
            result = await call()
        except GraphBubbleUp:
            await self.saver.adrive(self._finish(site, decision, INTERRUPTED))
            raise
        except Exception as exc:
            await self.saver.adrive(self._finish(site, decision, ERROR, error=_describe(exc)))
            raise
        finally:
            _current_key.reset(token)
        await self.saver.adrive(self._finish(site, decision, RESULT, result=result))
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
                            await self.saver.adrive(self._load(ctx, site))
                            ctx.loaded = True
                    escalated = await self.saver.adrive(self._escalate_inline(ctx, site))
                    self._answer_inline(ctx, site, escalated)
                    decision = await self.saver.adrive(self._begin(ctx, site, effective_policy()))
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
                        self.saver.drive(self._load(ctx, site))
                        ctx.loaded = True
                escalated = self.saver.drive(self._escalate_inline(ctx, site))
                self._answer_inline(ctx, site, escalated)
                decision = self.saver.drive(self._begin(ctx, site, effective_policy()))
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
        site = call_site(
            self._keys,
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
        entries, _, _ = self.saver.drive(self._read(str(thread_id), ("-", "+")))
        return entries

    async def aentries(self, thread_id: str) -> list[LedgerEntry]:
        """``entries`` for async code."""
        entries, _, _ = await self.saver.adrive(self._read(str(thread_id), ("-", "+")))
        return entries

    def middleware(self) -> Any:
        """An ``AgentMiddleware`` for LangChain's ``create_agent`` (needs ``langchain``)."""
        from langgraph_durable.middleware import LedgerMiddleware

        return LedgerMiddleware(self)
