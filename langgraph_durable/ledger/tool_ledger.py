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

Where each part lives: ``entries.py`` (what an entry holds, its record), ``sites.py``
(where a call is recorded), ``executions.py`` (which recorded calls a task attempt
continues: forks, rollbacks and crashes told apart), ``store.py`` (the Redis
conversation), ``plans.py`` (each attempt's decision), ``rollback.py`` (rolled-back
runs), ``divergence.py`` (calls that differ from the recorded ones), ``policies.py``
(a call's policy, from ``policies=`` or its tool's hints), ``running.py`` (task
attempts, escalations, the sync and async shells), ``durable.py`` (``@durable``),
``journal.py`` (model calls journaled at their place), ``journaled_model.py``
(``ledger.model``), ``wiring.py`` (the wirings refused with advice), ``retention.py``
(which entries retention drops), and here ``ToolLedger``, the public face and its
ToolNode wrappers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_durable.core.errors import ConfigurationError
from langgraph_durable.io.escalation_gauges import observe_escalations
from langgraph_durable.ledger.durable import DurableCalls
from langgraph_durable.ledger.entries import Divergence, LedgerEntry, Policy
from langgraph_durable.ledger.executions import Lineage
from langgraph_durable.ledger.journal import ModelJournal
from langgraph_durable.ledger.operators import Escalation, OperatorPlans
from langgraph_durable.ledger.policies import check_divergence, check_policies, hinted_policy
from langgraph_durable.ledger.sequences import CallSequence, LoadOnce, arun, run
from langgraph_durable.ledger.sites import Site, TaskContext, call_site, position_in_message
from langgraph_durable.ledger.wiring import refuse_sync_on_loop


@dataclass(frozen=True)
class _ToolCall:
    """One ToolNode call: its task attempt, where it sits in its AI message, its policy."""

    ledger: ToolLedger  # the ledger recording it (``_bound``)
    ctx: TaskContext
    call: dict[str, Any]
    position: int | None
    message_calls: list[dict[str, Any]]
    policy: Policy
    lineage: Lineage
    answers: list[LedgerEntry]  # the journaled answers its AI message came from


class ToolLedger(DurableCalls, ModelJournal, OperatorPlans):
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
        super().__init__(saver)
        self.policies = dict(policies or {})
        self.default_policy = default_policy
        self.on_divergence = check_divergence(on_divergence)
        self.use_tool_hints = use_tool_hints

    def policy(self, name: str, tool: Any = None) -> Policy:
        """The policy of the tool ``name``: its own in ``policies=``, else the one its
        hints give (``tool``: a LangChain ``BaseTool``; see ``policies.py``), else the
        default."""
        if name in self.policies:
            return self.policies[name]
        return self._hint(tool) or self.default_policy

    def _hint(self, tool: Any) -> Policy | None:
        return hinted_policy(tool) if self.use_tool_hints and tool is not None else None

    # -- ToolNode -------------------------------------------------------------------
    def tool_node(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """A LangGraph ``ToolNode`` over ``tools`` whose calls go through this ledger, in
        sync and async runs alike (``kwargs`` go to ``ToolNode``). Wiring by hand, pass
        both ``wrap_tool_call`` and ``awrap_tool_call``: a sync run uses only the first,
        an async run prefers the second."""
        taken = sorted({"wrap_tool_call", "awrap_tool_call"} & kwargs.keys())
        if taken:
            raise ConfigurationError(
                f"tool_node() wires {' and '.join(taken)} itself; to compose your own "
                "wrapper, build the ToolNode by hand and call the ledger's from it"
            )
        from langgraph.prebuilt import ToolNode

        return ToolNode(
            tools,
            wrap_tool_call=self.wrap_tool_call,
            awrap_tool_call=self.awrap_tool_call,
            **kwargs,
        )

    def _tool_call(self, request: Any) -> _ToolCall | None:
        """The task attempt this tool call belongs to and the ledger (``_bound``)
        recording it, or None for a call that runs unrecorded."""
        call = request.tool_call
        tool = getattr(request, "tool", None)
        policy = self.policy(call["name"], tool)
        if policy == "readonly":
            return None
        runtime = getattr(request, "runtime", None)
        config = getattr(runtime, "config", None)
        if config is None:
            return self._outside()
        ledger = self._bound(config)
        ctx = self._context(config, ledger._keys)
        if ctx is None:
            return self._outside()
        position, message_calls, message_id = position_in_message(request.state, call)
        call_ids = frozenset(str(c["id"]) for c in message_calls if c.get("id"))
        answers = self._answers_of(ctx.place.thread_id, call_ids)
        lineage = Lineage(
            call_ids=call_ids, journaled=bool(answers), message_id=message_id, steered=False
        )
        ctx.message_id = ctx.message_id or message_id
        return _ToolCall(ledger, ctx, call, position, message_calls, policy, lineage, answers)

    def _tool_site(self, found: _ToolCall) -> Site:
        """Where the call is recorded, once its task's execution is known."""
        return call_site(
            found.ledger._keys,
            found.ctx,
            found.call["name"],
            found.call.get("args", {}),
            tool_call_id=found.call.get("id"),
            position=found.position,
        )

    def _loaded(self, found: _ToolCall, escalations: list[Any]) -> None:
        """After the task's load: ask its questions; its first intent settles the
        journaled answers its AI message came from (journal.py)."""
        ctx = found.ctx
        ctx.unsettled = [e for e in found.answers if not e.settled and e.execution]
        found.ledger._ask(ctx, escalations)

    def _tool_sequence(self, found: _ToolCall, request: Any) -> CallSequence[tuple[Site, Any]]:
        """A tool call's sequence (``sequences.py``): the task's entries read once with
        every call of its AI message (escalations asked under the lock), then its intent
        begun at its place."""
        ledger, ctx = found.ledger, found.ctx
        yield LoadOnce(
            ctx,
            lambda: ledger._prepare_parallel(ctx, found.message_calls, found.lineage),
            lambda escalations: self._loaded(found, escalations),
        )
        site = self._tool_site(found)
        hint = self._hint(getattr(request, "tool", None))
        decision = yield ledger._begin(ctx, site, found.policy, hint)
        return site, decision

    def wrap_tool_call(self, request: Any, execute: Callable[[Any], Any]) -> Any:
        """``ToolNode(wrap_tool_call=...)``: replay a recorded result or record this call."""
        found = self._tool_call(request)
        if found is None:
            return execute(request)
        ledger = found.ledger
        refuse_sync_on_loop(ledger.saver)
        site, decision = run(ledger.saver, self._tool_sequence(found, request))
        if decision.replay:
            return decision.value
        return ledger._run_sync(site, decision, lambda: execute(request))

    async def awrap_tool_call(self, request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        """``ToolNode(awrap_tool_call=...)``: the async twin of ``wrap_tool_call``."""
        found = self._tool_call(request)
        if found is None:
            return await execute(request)
        ledger = found.ledger
        site, decision = await arun(ledger.saver, self._tool_sequence(found, request))
        if decision.replay:
            return decision.value
        return await ledger._run_async(site, decision, lambda: execute(request))

    # -- inspection -----------------------------------------------------------------
    def entries(self, thread_id: str) -> list[LedgerEntry]:
        """Every ledger entry of a thread, in task and position order (damaged ones too)."""
        read = self.saver.drive(self._read(str(thread_id), ("-", "+")))
        return read.entries  # type: ignore[no-any-return]

    async def aentries(self, thread_id: str) -> list[LedgerEntry]:
        """``entries`` for async code."""
        read = await self.saver.adrive(self._read(str(thread_id), ("-", "+")))
        return read.entries  # type: ignore[no-any-return]

    # -- operators ------------------------------------------------------------------
    def escalations(self, thread_ids: Sequence[str] | None = None) -> list[Escalation]:
        """Every call waiting for a human's answer, in ``thread_ids`` or in every thread
        of the key prefix (a SCAN: an operator's call)."""
        return self.saver.drive(self._escalations(thread_ids))  # type: ignore[no-any-return]

    async def aescalations(self, thread_ids: Sequence[str] | None = None) -> list[Escalation]:
        """``escalations`` for async code."""
        return await self.saver.adrive(self._escalations(thread_ids))  # type: ignore[no-any-return]

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
        plan = self._resolve(str(thread_id), idempotency_key, action, result, reason, by)
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
        plan = self._resolve(str(thread_id), idempotency_key, action, result, reason, by)
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
        plan = self._drop(str(thread_id), idempotency_key, reason, by)
        return self.saver.drive(plan)  # type: ignore[no-any-return]

    async def adrop(
        self, thread_id: str, idempotency_key: str, *, reason: str, by: str | None = None
    ) -> LedgerEntry:
        """``drop`` for async code."""
        plan = self._drop(str(thread_id), idempotency_key, reason, by)
        return await self.saver.adrive(plan)  # type: ignore[no-any-return]

    def middleware(self, *, journal_models: bool = True) -> Any:
        """An ``AgentMiddleware`` for LangChain's ``create_agent`` (needs ``langchain``):
        every tool call goes through this ledger and, with ``journal_models`` (the
        default), every model call is journaled, so a replayed model step returns the
        recorded response instead of asking the model again (``journal.py``)."""
        from langgraph_durable.ledger.middleware import LedgerMiddleware

        return LedgerMiddleware(self, journal_models=journal_models)

    def model(self, chat_model: Any) -> Any:
        """``chat_model`` (a LangChain chat model, or any ``Runnable``), journaled: inside a
        checkpointed graph task its ``invoke``/``ainvoke``/``stream``/``astream`` return
        the answer recorded at the call's place (the task and its order among the task's
        model calls) when there is one, else call the model and record its answer once
        complete. ``bind_tools`` and ``with_structured_output`` keep it journaled. Raises
        ``ConfigurationError`` for anything that is not a ``Runnable``."""
        from langchain_core.runnables import Runnable

        from langgraph_durable.ledger.journaled_model import JournaledModel

        if isinstance(chat_model, JournaledModel):
            return chat_model
        if not isinstance(chat_model, Runnable):
            raise ConfigurationError(
                f"ledger.model() journals a LangChain chat model or Runnable, got "
                f"{type(chat_model).__name__}; for any other call use @ledger.durable"
            )
        return JournaledModel(self, chat_model)
