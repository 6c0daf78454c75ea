"""The tool-result ledger: a resumed graph never calls a side-effecting tool twice.

For every call it records the *intent* before the tool runs and the *result* (or the
error raised) after, both synchronously, in the thread's own keys and under the same
integrity envelope as checkpoints. When LangGraph replays a task after a crash, a call
whose result is recorded gets that result back without running. A call with an intent
and no result (the process died during it, or its record is damaged) has an unknown
outcome, and the tool's policy decides: ``retry`` (same idempotency key), ``escalate``
(LangGraph ``interrupt()``, answered by a human) or ``fail``. A replayed call that
differs from the one recorded at its place (the model ran again and answered otherwise)
is asked about the same way by default (``on_divergence``).

Where a call is recorded (its ledger field, see ``keys.py``):
    checkpoint namespace (without the running task's id), superstep, task (node and
    path), the call's position (its index in the AI message, or its order in a node),
    the tool name and a hash of the canonical arguments.
The superstep and task path are stable when a task is replayed, also when
``durability="async"`` lost the checkpoint the task started from; the provider's
``tool_call_id`` is not part of it (providers reuse ids such as ``call_0``).

Where each part lives: ``context.py`` (the ledger context every plan reads),
``entries.py`` (what an entry holds, its record), ``sites.py`` (where a call is
recorded), ``executions.py`` and ``decide.py`` (which recorded calls a task attempt
continues, which it must ask about), ``store.py`` (the Redis conversation),
``calls.py`` (each attempt's decision, the call between its intent and its outcome),
``escalations.py`` (the questions a task asks), ``divergence.py`` (calls that differ
from the recorded ones), ``policies.py`` (a call's policy), ``journal.py`` and
``memory.py`` (model calls journaled at their place), ``operators.py`` (escalations
listed, answered, dropped), ``sequences.py`` (the one sync and one async loop that
drive a call), ``wiring.py`` (the wirings refused with advice), and ``integrations/``
(ToolNode, ``@durable``, the journaled model, ``create_agent`` middleware). Here,
``ToolLedger``: the public face, each method a line over those.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.io.escalation_gauges import observe_escalations
from langgraph_durable.ledger import operators
from langgraph_durable.ledger.context import LedgerContext
from langgraph_durable.ledger.entries import Divergence, LedgerEntry, Policy
from langgraph_durable.ledger.integrations import durable, tool_calls
from langgraph_durable.ledger.operators import Escalation
from langgraph_durable.ledger.policies import check_divergence, check_policies, hinted_policy
from langgraph_durable.ledger.store import read
from langgraph_durable.ledger.wiring import durable_saver


class ToolLedger:
    """Records every side-effecting call so that a resumed graph never repeats one.

    ``saver`` is the graph's ``RedisSaver`` or ``AsyncRedisSaver``: entries live in the
    thread's keys, so ``delete_thread``, ``copy_thread`` and ``ttl`` cover them. Without
    it (``ToolLedger()``), each call is recorded through the saver its graph task runs
    with, found in the run's config: in LangGraph Server, the server's checkpointer
    (``langgraph_durable.server.checkpointer``). A task running on any other checkpointer
    raises ``ConfigurationError``; ``entries()`` then needs a saver (``ToolLedger(saver)``).

    ``policies`` maps tool names to what happens when a call's outcome is unknown:
    ``"escalate"`` (an ``interrupt()``), ``"retry"``, ``"fail"``, or ``"readonly"`` for
    tools without side effects, which are never recorded. A tool not named there gets
    what its metadata hints say (``readOnlyHint`` -> readonly, ``idempotentHint`` ->
    retry; ``use_tool_hints=False`` ignores them), else ``default_policy``.
    ``on_divergence`` decides what a replayed call whose name or arguments differ from
    the call recorded at its place does: ``"escalate"`` (the default) asks a human like
    an unknown outcome, ``"raise"`` raises ``ToolCallDivergedError``, ``"new_call"``
    runs it as a new call.

    Integrations: ``ledger.tool_node(tools)`` (a ToolNode wired for sync and async
    runs); ``ledger.middleware()`` for ``create_agent`` (tool calls, and model calls
    journaled); ``ledger.model(chat_model)`` for model calls in hand-written nodes;
    ``@ledger.durable`` for calls inside ordinary nodes and Functional API tasks.
    """

    def __init__(
        self,
        saver: Any = None,
        *,
        policies: Mapping[str, Policy] | None = None,
        default_policy: Policy = "escalate",
        on_divergence: Divergence = "escalate",
        use_tool_hints: bool = True,
    ) -> None:
        check_policies(policies or {}, default_policy)
        if saver is not None and durable_saver(saver) is None:
            raise ConfigurationError(
                f"ToolLedger needs a langgraph-durable RedisSaver or AsyncRedisSaver, got "
                f"{type(saver).__name__}"
            )
        self.context = LedgerContext(
            saver=durable_saver(saver),
            policies=MappingProxyType(dict(policies or {})),
            default_policy=default_policy,
            on_divergence=check_divergence(on_divergence),
            use_tool_hints=use_tool_hints,
        )

    @property
    def saver(self) -> Any:
        """The saver entries are recorded through (``ConfigurationError`` for a ledger
        without one: it records through each task's own)."""
        return self.context.recording_saver

    @property
    def policies(self) -> Mapping[str, Policy]:
        return self.context.policies

    @property
    def default_policy(self) -> Policy:
        return self.context.default_policy

    @property
    def on_divergence(self) -> Divergence:
        return self.context.on_divergence

    @property
    def use_tool_hints(self) -> bool:
        return self.context.use_tool_hints

    def policy(self, name: str, tool: Any = None) -> Policy:
        """The policy of the tool ``name``: its own in ``policies=``, else the one its
        hints give (``tool``: a LangChain ``BaseTool``; see ``policies.py``), else the
        default."""
        return self.context.policy(name, hinted_policy(tool) if tool is not None else None)

    # -- integrations -----------------------------------------------------------------
    def tool_node(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """A LangGraph ``ToolNode`` over ``tools`` whose calls go through this ledger, in
        sync and async runs alike (``kwargs`` go to ``ToolNode``). Wiring by hand, pass
        both ``wrap_tool_call`` and ``awrap_tool_call``: a sync run uses only the first,
        an async run prefers the second."""
        return tool_calls.tool_node(self, tools, **kwargs)

    def wrap_tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        """``ToolNode(wrap_tool_call=...)``: replay a recorded result or record this call."""
        return tool_calls.wrap_tool_call(self.context, request, execute)

    async def awrap_tool_call(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        """``ToolNode(awrap_tool_call=...)``: the async twin of ``wrap_tool_call``."""
        return await tool_calls.awrap_tool_call(self.context, request, execute)

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
        arguments. Outside a checkpointed graph the function just runs. Inside a
        Functional API ``@task``, put it under ``@task``; over one it raises
        ``ConfigurationError``.
        """
        return durable.durable(self.context, fn, name=name, policy=policy)

    # -- inspection -----------------------------------------------------------------
    def entries(self, thread_id: str) -> list[LedgerEntry]:
        """Every ledger entry of a thread, in task and position order (damaged ones too)."""
        return self.saver.drive(read(self.context, str(thread_id), ("-", "+"))).entries  # type: ignore[no-any-return]

    async def aentries(self, thread_id: str) -> list[LedgerEntry]:
        """``entries`` for async code."""
        found = await self.saver.adrive(read(self.context, str(thread_id), ("-", "+")))
        return found.entries  # type: ignore[no-any-return]

    # -- operators ------------------------------------------------------------------
    def escalations(self, thread_ids: Sequence[str] | None = None) -> list[Escalation]:
        """Every call waiting for a human's answer, in ``thread_ids`` or in every thread
        of the key prefix (a SCAN: an operator's call)."""
        return self.saver.drive(operators.escalations(self.context, thread_ids))  # type: ignore[no-any-return]

    async def aescalations(self, thread_ids: Sequence[str] | None = None) -> list[Escalation]:
        """``escalations`` for async code."""
        return await self.saver.adrive(operators.escalations(self.context, thread_ids))  # type: ignore[no-any-return]

    def observe_escalations(self, meter_provider: Any = None) -> bool:
        """Report the calls waiting for an answer as OpenTelemetry gauges:
        ``lgd.escalations.waiting`` and ``lgd.escalations.oldest_age`` (seconds), read
        with ``escalations()`` at each metrics collection (a SCAN of every thread of
        the key prefix: turn it on in one process). ``meter_provider``: None for the
        global one. Returns False, doing nothing, without ``opentelemetry-api``."""
        return observe_escalations(self.escalations, meter_provider)

    def resolve(
        self,
        thread_id: str,
        idempotency_key: str,
        action: str,
        *,
        result: Any = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> LedgerEntry:
        """Answer a waiting call outside the graph, as ``Command(resume=...)`` would:
        ``"retry"`` runs it again (same key), ``"skip"`` records ``result`` as its output,
        ``"fail"`` raises in the graph. Recorded with ``reason`` and ``by`` and the time;
        the thread's next run applies it without asking again (answer one way: this, or
        ``Command(resume=...)``). Returns the updated entry.

        Raises:
            InvalidConfigError: no call of ``thread_id`` waits with that key, or the
                answer is not one its question takes (``skip`` without ``result``).
            LeaseHeldError: a worker holds the thread (it may be running the call).
        """
        plan = operators.resolve(
            self.context, str(thread_id), idempotency_key, action, result, reason, by
        )
        return self.saver.drive(plan)  # type: ignore[no-any-return]

    async def aresolve(
        self,
        thread_id: str,
        idempotency_key: str,
        action: str,
        *,
        result: Any = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> LedgerEntry:
        """``resolve`` for async code."""
        plan = operators.resolve(
            self.context, str(thread_id), idempotency_key, action, result, reason, by
        )
        return await self.saver.adrive(plan)  # type: ignore[no-any-return]

    def drop(
        self, thread_id: str, idempotency_key: str, *, reason: str, by: str | None = None
    ) -> LedgerEntry:
        """Set a recorded model answer aside: the next attempt at its place asks the model
        again (a bad answer a resume would replay). Also takes an entry of a rolled-back
        run, which then leaves ``escalations``. Recorded with ``reason``, ``by`` and the
        time; the entry keeps its result. Returns the updated entry.

        Raises:
            InvalidConfigError: no entry of ``thread_id`` has that key, it is a tool call
                of a run that was not rolled back (``resolve`` answers those), it was
                dropped already, or ``reason`` is empty.
            LeaseHeldError: a worker holds the thread (it may be replaying the answer).
        """
        plan = operators.drop(self.context, str(thread_id), idempotency_key, reason, by)
        return self.saver.drive(plan)  # type: ignore[no-any-return]

    async def adrop(
        self, thread_id: str, idempotency_key: str, *, reason: str, by: str | None = None
    ) -> LedgerEntry:
        """``drop`` for async code."""
        plan = operators.drop(self.context, str(thread_id), idempotency_key, reason, by)
        return await self.saver.adrive(plan)  # type: ignore[no-any-return]

    def middleware(self, *, journal_models: bool = True) -> Any:
        """An ``AgentMiddleware`` for LangChain's ``create_agent`` (needs ``langchain``):
        every tool call goes through this ledger and, with ``journal_models`` (the
        default), every model call is journaled, so a replayed model step returns the
        recorded response instead of asking the model again (``journal.py``)."""
        from langgraph_durable.ledger.integrations.middleware import LedgerMiddleware

        return LedgerMiddleware(self.context, journal_models=journal_models)

    def model(self, chat_model: Any) -> Any:
        """``chat_model`` (a LangChain chat model, or any ``Runnable``), journaled: inside a
        checkpointed graph task its ``invoke``/``ainvoke``/``stream``/``astream`` return
        the answer recorded at the call's place (the task and its order among the task's
        model calls) when there is one, else call the model and record its answer once
        complete. ``bind_tools`` and ``with_structured_output`` keep it journaled. Raises
        ``ConfigurationError`` for anything that is not a ``Runnable``."""
        from langchain_core.runnables import Runnable

        from langgraph_durable.ledger.integrations.model import JournaledModel

        if isinstance(chat_model, JournaledModel):
            return chat_model
        if not isinstance(chat_model, Runnable):
            raise ConfigurationError(
                f"ledger.model() journals a LangChain chat model or Runnable, got "
                f"{type(chat_model).__name__}; for any other call use @ledger.durable"
            )
        return JournaledModel(self.context, chat_model)
